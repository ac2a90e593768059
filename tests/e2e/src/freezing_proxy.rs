//! A TCP proxy on loopback in front of the apiserver that can freeze: once armed, it stops
//! forwarding on the connections open at that moment but keeps them open, as a load balancer or
//! conntrack table that dropped a flow without telling either end. Connections opened later are
//! forwarded. `cut` closes the frozen connections, as a timeout somewhere finally would. It runs on
//! threads of the test process and stops accepting when dropped.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One forwarded connection: both sockets (to close them), and whether it is frozen.
struct Connection {
    client: TcpStream,
    server: TcpStream,
    frozen: Arc<AtomicBool>,
}

pub struct FreezingProxy {
    address: SocketAddr,
    connections: Arc<Mutex<Vec<Connection>>>,
    stop: Arc<AtomicBool>,
}

impl FreezingProxy {
    /// A proxy to `upstream` (such as `127.0.0.1:6443`).
    pub fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        // Polled, so that dropping the proxy ends the acceptor without a connection to wake it.
        listener.set_nonblocking(true).expect("non-blocking");
        let connections = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (connections, stop) = (connections.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => forward(client, upstream, &connections),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(_) => return,
                    }
                }
            });
        }
        Self {
            address,
            connections,
            stop,
        }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Freezes every connection open now; returns how many.
    pub fn arm(&self) -> usize {
        let connections = self.connections.lock().expect("connections");
        for connection in connections.iter() {
            connection.frozen.store(true, Ordering::SeqCst);
        }
        connections.len()
    }

    /// Closes the frozen connections, both ends; returns how many.
    pub fn cut(&self) -> usize {
        let mut connections = self.connections.lock().expect("connections");
        let mut cut = 0;
        connections.retain(|c| {
            if c.frozen.load(Ordering::SeqCst) {
                let _ = c.client.shutdown(Shutdown::Both);
                let _ = c.server.shutdown(Shutdown::Both);
                cut += 1;
                false
            } else {
                true
            }
        });
        cut
    }
}

impl Drop for FreezingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Ok(connections) = self.connections.lock() {
            for c in connections.iter() {
                let _ = c.client.shutdown(Shutdown::Both);
                let _ = c.server.shutdown(Shutdown::Both);
            }
        }
    }
}

fn forward(client: TcpStream, upstream: SocketAddr, connections: &Mutex<Vec<Connection>>) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let frozen = Arc::new(AtomicBool::new(false));
    let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (Ok(client_writer), Ok(server_writer)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    connections.lock().expect("connections").push(Connection {
        client,
        server,
        frozen: frozen.clone(),
    });
    let back = frozen.clone();
    std::thread::spawn(move || pump(client_reader, server_writer, &frozen));
    std::thread::spawn(move || pump(server_reader, client_writer, &back));
}

/// Copies `from` to `to` until either closes; once `frozen`, what it reads is held back, never
/// written.
fn pump(mut from: TcpStream, mut to: TcpStream, frozen: &AtomicBool) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if frozen.load(Ordering::SeqCst) {
            // Held back, never written, until the connection is cut (the read then ends).
            while matches!(from.read(&mut buffer), Ok(n) if n > 0) {}
            return;
        }
        if to.write_all(&buffer[..read]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
