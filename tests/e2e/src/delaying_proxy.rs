//! A TCP proxy on loopback in front of the apiserver that can delay requests: once set, every chunk
//! a client sends is written to the apiserver `delay` later, as a congested or rerouted path would
//! hold it; answers come back at once, so the client goes on seeing the cluster live. What a client
//! sent and the apiserver has not received yet is lost when the client closes the connection (a
//! client that gave up on a request resets it), so a request abandoned in time never lands. It runs
//! on threads of the test process and stops accepting when dropped.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

pub struct DelayingProxy {
    address: SocketAddr,
    delay_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl DelayingProxy {
    /// A proxy to `upstream` (such as `127.0.0.1:6443`), forwarding at once until
    /// [`DelayingProxy::delay_requests`].
    pub fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        // Polled, so that dropping the proxy ends the acceptor without a connection to wake it.
        listener.set_nonblocking(true).expect("non-blocking");
        let delay_ms = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (delay_ms, stop) = (delay_ms.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => forward(client, upstream, &delay_ms),
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
            delay_ms,
            stop,
        }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Delays what clients send from now on, on every connection, open or new.
    pub fn delay_requests(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.delay_ms.store(ms, Ordering::SeqCst);
    }
}

impl Drop for DelayingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn forward(client: TcpStream, upstream: SocketAddr, delay_ms: &Arc<AtomicU64>) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    pipe(client_reader, server, delay_ms.clone());
    pipe(server_reader, client, Arc::new(AtomicU64::new(0)));
}

/// What one direction carries: a chunk, when it is due and whether it was held back, or the end
/// (the reading side closed).
enum Item {
    Data {
        due: Instant,
        delayed: bool,
        bytes: Vec<u8>,
    },
    End,
}

/// Copies `from` to `to` on two threads: one reads and stamps each chunk with its due time, the
/// other writes it then. Once `from` closed, the chunks it sent that are still held back by a delay
/// are dropped, and `to` is closed.
fn pipe(mut from: TcpStream, mut to: TcpStream, delay_ms: Arc<AtomicU64>) {
    let (sender, receiver) = mpsc::channel::<Item>();
    let closed = Arc::new(AtomicBool::new(false));
    let reader_closed = closed.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let delay = Duration::from_millis(delay_ms.load(Ordering::SeqCst));
                    let item = Item::Data {
                        due: Instant::now() + delay,
                        delayed: !delay.is_zero(),
                        bytes: buffer[..n].to_vec(),
                    };
                    if sender.send(item).is_err() {
                        break;
                    }
                }
            }
        }
        reader_closed.store(true, Ordering::SeqCst);
        let _ = sender.send(Item::End);
    });
    std::thread::spawn(move || {
        while let Ok(item) = receiver.recv() {
            match item {
                Item::Data {
                    due,
                    delayed,
                    bytes,
                } => {
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    if delayed && closed.load(Ordering::SeqCst) {
                        // The sender is gone: what the path still held is lost with its connection.
                        continue;
                    }
                    if to.write_all(&bytes).is_err() {
                        break;
                    }
                }
                Item::End => break,
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}
