//! A tiny HTTP CONNECT proxy on loopback, as a corporate proxy between kubectl users and their
//! apiserver: it opens a TCP tunnel to whatever each CONNECT names, and records every tunnel, so a
//! test can tell that a client's requests went through it (TLS stays end to end: the proxy sees
//! only the target). It runs on threads of the test process and stops accepting when dropped; a
//! tunnel ends when either side closes.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct ConnectProxy {
    address: SocketAddr,
    tunnels: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl ConnectProxy {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        // Polled, so that dropping the proxy ends the acceptor without a connection to wake it.
        listener.set_nonblocking(true).expect("non-blocking");
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (tunnels, stop) = (tunnels.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let tunnels = tunnels.clone();
                            std::thread::spawn(move || tunnel(client, &tunnels));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(_) => return,
                    }
                }
            })
        };
        Self {
            address,
            tunnels,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// `http://127.0.0.1:PORT`, for a kubeconfig's `proxy-url`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The target (`host:port`) of every tunnel opened so far.
    pub fn tunnels(&self) -> Vec<String> {
        self.tunnels.lock().expect("not poisoned").clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Serves one client: reads its CONNECT, opens the tunnel, then copies bytes both ways until either
/// side closes.
fn tunnel(mut client: TcpStream, tunnels: &Mutex<Vec<String>>) {
    let _ = client.set_nonblocking(false);
    let Some(target) = connect_target(&mut client) else {
        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let Ok(upstream) = TcpStream::connect(&target) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    tunnels.lock().expect("not poisoned").push(target);
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let (Ok(mut client_reader), Ok(mut upstream_writer)) =
        (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let upload = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_reader, &mut upstream_writer);
        let _ = upstream_writer.shutdown(Shutdown::Write);
    });
    let (mut upstream_reader, mut client_writer) = (upstream, client);
    let _ = std::io::copy(&mut upstream_reader, &mut client_writer);
    let _ = client_writer.shutdown(Shutdown::Both);
    let _ = upload.join();
}

/// The `host:port` of a `CONNECT host:port HTTP/1.1` request, its header read to the blank line
/// (byte by byte: the client sends nothing else before the answer).
fn connect_target(client: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || client.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).ok()?;
    let mut words = head.lines().next()?.split_whitespace();
    (words.next()? == "CONNECT").then_some(())?;
    words.next().map(str::to_owned)
}
