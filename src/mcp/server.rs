//! The protocol layer: an `rmcp` server handler that lists the tools and runs each call on the
//! blocking pool (the store is synchronous; calls take turns on the server's one store, see
//! [`Tools`]).

use super::tools::{ToolDef, ToolReply, Tools};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::Arc;

#[derive(Clone)]
pub struct MemscopeServer {
    tools: Arc<Tools>,
}

impl MemscopeServer {
    pub fn new(tools: Arc<Tools>) -> MemscopeServer {
        MemscopeServer { tools }
    }
}

fn to_tool(def: ToolDef) -> Tool {
    let schema = match def.input_schema {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("tool schemas are objects"),
    };
    let annotations = ToolAnnotations::from_raw(
        Some(def.title.to_string()),
        Some(def.read_only),
        Some(def.destructive),
        None,
        Some(false),
    );
    Tool::new(def.name, def.description, Arc::new(schema))
        .with_title(def.title)
        .with_annotations(annotations)
}

fn to_result(reply: ToolReply) -> CallToolResult {
    let mut content = vec![ContentBlock::text(reply.text)];
    let data = reply.data;
    if !reply.is_error {
        // For hosts that show only text, maybe on a terminal: JSON with the characters a
        // terminal acts on escaped, as the CLI's `--json` prints it.
        content.push(ContentBlock::text(
            crate::model::to_json(&data).unwrap_or_else(|_| data.to_string()),
        ));
    }
    let mut result = if reply.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(data);
    result
}

impl ServerHandler for MemscopeServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("memscope", env!("CARGO_PKG_VERSION"))
                    .with_title("memscope memory"),
            )
            .with_instructions(self.tools.instructions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            tools: self.tools.definitions().into_iter().map(to_tool).collect(),
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let client = context.client_info().map(|i| i.name);
        let tools = self.tools.clone();
        let call_name = name.clone();
        let cancelled = context.ct.clone();
        // Taken here, on the runtime's one thread, in the order rmcp read the requests: the
        // blocking pool's threads may start in any order.
        let ticket = tools.ticket();
        let joined = tokio::task::spawn_blocking(move || {
            tools.call(
                ticket,
                &call_name,
                request.arguments,
                client.as_deref(),
                &|| cancelled.is_cancelled(),
            )
        })
        .await;
        let reply = match joined {
            Ok(Some(reply)) => reply,
            Ok(None) => {
                let offered: Vec<&str> = self.tools.definitions().iter().map(|d| d.name).collect();
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool '{name}': this server offers {}",
                        offered.join(", ")
                    ),
                    None,
                ));
            }
            Err(e) => ToolReply {
                text: format!(
                    "{name} failed inside memscope ({e}); nothing more is known — please report it"
                ),
                data: serde_json::json!({ "error": "internal" }),
                is_error: true,
            },
        };
        Ok(to_result(reply).into())
    }
}
