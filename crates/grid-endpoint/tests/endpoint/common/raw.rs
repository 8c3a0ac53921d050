//! A raw TCP fake server: each accepted connection reads one HTTP request and then
//! does the next scripted [`Act`] (hang, answer bytes, cut the body short, close).
//! It accepts at most as many connections as it has acts, then stops listening.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What to do with one connection, after reading its request.
#[derive(Debug, Clone)]
pub enum Act {
    /// Say nothing for a while (bounded), then close.
    Hang(Duration),
    /// Write these bytes (a whole HTTP response) and close.
    Respond(Vec<u8>),
    /// Close without answering.
    Close,
    /// Answer 500 with the request's head (headers included) as the body.
    EchoHead500,
}

impl Act {
    /// A complete response with this status line and JSON body.
    pub fn json(status: &str, body: &str) -> Act {
        Act::Respond(
            format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    }

    /// A response that announces `announced` body bytes but sends only `body`.
    pub fn truncated(announced: usize, body: &str) -> Act {
        Act::Respond(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {announced}\r\nconnection: close\r\n\r\n{body}"
            )
            .into_bytes(),
        )
    }
}

/// A running raw server.
pub struct RawServer {
    /// Its address.
    pub addr: SocketAddr,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    /// The heads of the requests read.
    pub heads: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RawServer {
    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a raw server on loopback that performs `acts`, one per connection.
pub async fn spawn(acts: Vec<Act>) -> RawServer {
    let listener = TcpListener::bind(super::loopback())
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let connections = Arc::new(AtomicUsize::new(0));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let (c, h) = (connections.clone(), heads.clone());
    let task = tokio::spawn(async move {
        for act in acts {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            c.fetch_add(1, Ordering::SeqCst);
            let h = h.clone();
            tokio::spawn(async move { serve(stream, act, h).await });
        }
    });
    RawServer {
        addr,
        connections,
        heads,
        task,
    }
}

async fn serve(mut stream: TcpStream, act: Act, heads: Arc<Mutex<Vec<String>>>) {
    let head = read_request(&mut stream).await;
    heads.lock().expect("heads").push(head.clone());
    match act {
        Act::Hang(d) => tokio::time::sleep(d).await,
        Act::Respond(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.flush().await;
        }
        Act::Close => {}
        Act::EchoHead500 => {
            let body = head.replace(['\r', '\n'], " ");
            let resp = format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(resp.as_bytes()).await;
        }
    }
    let _ = stream.shutdown().await;
}

/// Reads one request (head and a Content-Length body, bounded); returns the head.
async fn read_request(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            if let Some(end) = find(&buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())
                            .flatten()
                    })
                    .unwrap_or(0);
                while buf.len() < end + 4 + len {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                return head;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return String::from_utf8_lossy(&buf).into_owned(),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.len() > 1 << 20 {
                return String::new();
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap_or_default()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
