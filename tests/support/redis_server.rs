//! A throwaway `redis-server` for tests, or the one named by `REDIS_URL`.
//!
//! When `redis-server` is not installed, tests print a skip message — unless `CI=true`, where a
//! missing server fails the test, so that CI can never pass by skipping.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use turnstile::store::{RedisOptions, RedisStore};

/// How long a freshly started server may take to answer PING.
const STARTUP: Duration = Duration::from_secs(10);

/// A Redis to test against; a server started here is killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    url: String,
}

impl RedisServer {
    /// `REDIS_URL` if set, else a new `redis-server` on a free loopback port with persistence
    /// off. `None` means "skip": no server is installed and this is not CI.
    pub fn start() -> Option<RedisServer> {
        if let Ok(url) = std::env::var("REDIS_URL") {
            return Some(RedisServer { child: None, url });
        }
        for _ in 0..3 {
            let port = free_port();
            let spawned = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let child = match spawned {
                Ok(child) => child,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    assert!(
                        std::env::var("CI").as_deref() != Ok("true"),
                        "redis-server is not installed, and CI=true requires the Redis tests to run"
                    );
                    eprintln!(
                        "SKIPPED: redis-server is not installed (set REDIS_URL or install it)"
                    );
                    return None;
                }
                Err(e) => panic!("could not start redis-server: {e}"),
            };
            let server = RedisServer {
                child: Some(child),
                url: format!("redis://127.0.0.1:{port}/"),
            };
            if wait_for_pong(port) {
                return Some(server);
            }
            // Most likely another process took the port between our probe and the server's
            // bind; try another one.
        }
        panic!("redis-server did not start answering within {STARTUP:?}");
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A store on this server with a fresh, random prefix: an empty namespace.
    pub async fn store(&self) -> RedisStore {
        let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
        RedisStore::connect(&self.url, RedisOptions::default().with_prefix(prefix))
            .await
            .expect("connect to the test redis")
    }

    /// Stops a server started here (no-op for `REDIS_URL`).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a probe socket");
    listener.local_addr().expect("probe address").port()
}

fn wait_for_pong(port: u16) -> bool {
    let deadline = Instant::now() + STARTUP;
    while Instant::now() < deadline {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut reply = [0u8; 7];
            if stream.write_all(b"PING\r\n").is_ok()
                && stream.read_exact(&mut reply).is_ok()
                && &reply == b"+PONG\r\n"
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
