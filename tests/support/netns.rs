//! Network hosts of one test's own: Linux network namespaces, each joined to the root namespace
//! by a veth pair with a /30 of its own, so that a process run in one (`ip netns exec`) reaches
//! the root namespace's services over a real network path from an address of its own. Names and
//! addresses come from the test process's id, so parallel runs cannot collide; the namespaces
//! and veth pairs are deleted when the value is dropped, a failing test's too.

use std::process::{Command, Stdio};

/// One namespace: its name, and the two ends' addresses of the /30 joining it to the root.
pub struct NetHost {
    pub ns: String,
    /// The veth end in the root namespace.
    pub root_link: String,
    /// The root namespace's address on this host's link: where the host reaches services.
    pub root_addr: String,
    /// The host's own address, as the server sees its connections come from.
    pub host_addr: String,
}

pub struct NetHosts {
    pub hosts: Vec<NetHost>,
    /// The /24 all hosts' links are in (for a server's pg_hba.conf).
    pub subnet: String,
}

/// `ip ARGS…`; the reason (its stderr) when it fails or cannot run.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`ip` cannot run ({e}): install iproute2"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The next host's number in this process: its names and its /30 of the process's /24.
static NEXT_HOST: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl NetHosts {
    /// `count` hosts (at most 64 in a process), or why this machine does not allow them (not root, no `ip`, no
    /// CAP_NET_ADMIN).
    pub fn create(count: usize) -> Result<NetHosts, String> {
        if !super::pg_cluster::is_root() {
            return Err("not root".into());
        }
        let pid = std::process::id();
        let (a, b) = (64 + (pid >> 8) % 128, pid & 0xff);
        let mut made = NetHosts {
            hosts: Vec::new(),
            subnet: format!("10.{a}.{b}.0/24"),
        };
        for _ in 0..count {
            // Numbered across the process: two tests making hosts at once must not share a
            // name (found by CI: one test's drop deleted the other's link).
            let i = NEXT_HOST.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if i >= 64 {
                return Err("more than 64 network hosts in one test process".into());
            }
            let ns = format!("msf{pid}h{i}");
            let root_link = format!("msf{pid}r{i}");
            let ns_link = format!("msf{pid}n{i}");
            let root_addr = format!("10.{a}.{b}.{}", 4 * i + 1);
            let host_addr = format!("10.{a}.{b}.{}", 4 * i + 2);
            // Leftovers of an earlier run that had this process id and was killed.
            let _ = ip(&["netns", "del", &ns]);
            let _ = ip(&["link", "del", &root_link]);
            ip(&["netns", "add", &ns])?;
            made.hosts.push(NetHost {
                ns: ns.clone(),
                root_link: root_link.clone(),
                root_addr: root_addr.clone(),
                host_addr: host_addr.clone(),
            });
            ip(&[
                "link", "add", &root_link, "type", "veth", "peer", "name", &ns_link,
            ])?;
            ip(&["link", "set", &ns_link, "netns", &ns])?;
            ip(&["addr", "add", &format!("{root_addr}/30"), "dev", &root_link])?;
            ip(&["link", "set", &root_link, "up"])?;
            let inside = |args: &[&str]| {
                let mut all = vec!["netns", "exec", &ns, "ip"];
                all.extend_from_slice(args);
                ip(&all)
            };
            inside(&["addr", "add", &format!("{host_addr}/30"), "dev", &ns_link])?;
            inside(&["link", "set", &ns_link, "up"])?;
            inside(&["link", "set", "lo", "up"])?;
        }
        Ok(made)
    }
}

impl NetHost {
    /// `program args…` run inside this host's namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, program]);
        c
    }
}

impl Drop for NetHosts {
    fn drop(&mut self) {
        for h in &self.hosts {
            // Deleting the namespace deletes the veth end in it, and with it its peer; the
            // second command is for a pair that never made it into the namespace.
            let _ = ip(&["netns", "del", &h.ns]);
            let _ = ip(&["link", "del", &h.root_link]);
        }
    }
}
