//! A TCP relay in front of the PostgreSQL test server that counts round trips: a client that
//! waits for each answer before it speaks again (memscope's driver) sends one flight per round
//! trip, so the flights are what a command costs over a network link, whatever its latency.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

pub struct Relay {
    url: String,
    flights: Arc<AtomicUsize>,
}

/// Who spoke last on one connection: nobody, the client, the server.
const NOBODY: u8 = 0;
const CLIENT: u8 = 1;
const SERVER: u8 = 2;

impl Relay {
    /// A relay to the server of `url` (`postgres://user:pw@host:port/db`), and the same
    /// address through it.
    pub fn to(url: &str) -> Relay {
        let (head, rest) = url.split_once('@').expect("an address with a login");
        let (server, db) = rest.split_once('/').expect("an address with a database");
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().unwrap().port();
        let flights = Arc::new(AtomicUsize::new(0));
        let (server, counted) = (server.to_string(), flights.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(upstream) = TcpStream::connect(&server) else {
                    continue;
                };
                let last = Arc::new(AtomicU8::new(NOBODY));
                pump(
                    &client,
                    &upstream,
                    CLIENT,
                    last.clone(),
                    Some(counted.clone()),
                );
                pump(&upstream, &client, SERVER, last, None);
            }
        });
        Relay {
            url: format!("{head}@127.0.0.1:{port}/{db}"),
            flights,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The client flights so far, over every connection made through the relay.
    pub fn flights(&self) -> usize {
        self.flights.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to` on a thread of its own; a read by the `speaker` after the other side
/// spoke starts a flight (counted into `flights` when given).
fn pump(
    from: &TcpStream,
    to: &TcpStream,
    speaker: u8,
    last: Arc<AtomicU8>,
    flights: Option<Arc<AtomicUsize>>,
) {
    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // The driver's Terminate ('X', length 4), sent as a client is dropped, is no round
            // trip, and whether it leaves before the process exits is a race: not counted.
            let terminate = buf[..n] == [b'X', 0, 0, 0, 4];
            if last.swap(speaker, Ordering::SeqCst) != speaker && !terminate {
                if let Some(f) = &flights {
                    f.fetch_add(1, Ordering::SeqCst);
                }
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
