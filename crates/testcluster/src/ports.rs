//! Free loopback ports, so that several clusters can run side by side.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Mutex;

use crate::Error;

/// Ports already handed out by this process: clusters started in parallel threads never get the
/// same one.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Asks the kernel for an unused port on 127.0.0.1.
///
/// The port is free when this returns; another process could take it before the component binds it,
/// which is unlikely enough that a start-up failure is reported rather than retried here.
pub fn free_port() -> Result<u16, Error> {
    loop {
        let port = ask_kernel()?;
        let mut handed_out = HANDED_OUT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if handed_out.get_or_insert_with(HashSet::new).insert(port) {
            return Ok(port);
        }
    }
}

fn ask_kernel() -> Result<u16, Error> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(|source| Error::Io {
        context: "binding 127.0.0.1:0 to find a free port".into(),
        source,
    })?;
    let port = listener
        .local_addr()
        .map_err(|source| Error::Io {
            context: "reading the bound port".into(),
            source,
        })?
        .port();
    Ok(port)
}
