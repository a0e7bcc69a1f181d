//! A private PostgreSQL server for tests that need one configured their own way (TLS): a fresh
//! cluster made by `initdb` in a temporary folder, run by `postgres` on a free loopback port,
//! stopped and removed on drop. Certificates for it are made at test time with rcgen.
//!
//! PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user
//! (`runuser`), which owns the folder. The server binaries are looked up in
//! `$TURNSTILE_TEST_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`. A server that cannot
//! start fails the test with the server's own log, never skips it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_postgres::NoTls;

/// Longest the server may take to accept connections after it was started.
const STARTUP: Duration = Duration::from_secs(30);

/// A certificate authority made for one test, and what it signs.
pub struct TestCa {
    /// The CA certificate, PEM: what `sslrootcert` names.
    pub cert_pem: String,
    /// Signs server certificates.
    issuer: Issuer<'static, KeyPair>,
}

/// A server certificate and its key, PEM.
pub struct ServerCert {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8).
    pub key_pem: String,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("self-signed CA");
        Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` (DNS names or IP addresses), signed by this CA.
    pub fn server_cert(&self, names: &[&str]) -> ServerCert {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("server parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, "turnstile test server");
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("sign the server certificate");
        ServerCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// Writes the CA certificate to `dir/file` and returns its path.
    pub fn write(&self, dir: &Path, file: &str) -> PathBuf {
        let path = dir.join(file);
        std::fs::write(&path, &self.cert_pem).expect("write the CA certificate");
        path
    }
}

/// A private PostgreSQL server; stopped (and its folder removed) on drop.
pub struct PostgresServer {
    /// `runuser … postgres` (or `postgres` itself when not root).
    child: Option<Child>,
    /// The server binaries.
    bin: PathBuf,
    /// Holds the data folder, the socket, the certificates and the log.
    dir: tempfile::TempDir,
    /// The loopback port it listens on.
    port: u16,
}

impl PostgresServer {
    /// A fresh server on a free port of 127.0.0.1, trusting every local connection, with TLS
    /// on when `tls` is given. Fails the test, with the server's log, if it does not start.
    pub async fn start(tls: Option<&ServerCert>) -> Self {
        let bin = server_binaries();
        let mut dir = tempfile::Builder::new()
            .prefix("turnstile-pg-")
            .tempdir()
            .expect("a folder for the private server");
        let data = dir.path().join("data");
        if let Some(cert) = tls {
            write_private(&dir.path().join("server.crt"), &cert.cert_pem);
            write_private(&dir.path().join("server.key"), &cert.key_pem);
        }
        hand_to_server_user(dir.path());
        run_to_end(
            as_server_user(&bin.join("initdb"))
                .arg("-D")
                .arg(&data)
                .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]),
            "initdb",
        );
        if tls.is_some() {
            // In the configuration file, not on the command line, so that a test can turn TLS
            // off with ALTER SYSTEM and a reload (command-line settings would win).
            let conf = format!(
                "\nssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                dir.path().join("server.crt").display(),
                dir.path().join("server.key").display()
            );
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(data.join("postgresql.conf"))
                .expect("open postgresql.conf");
            std::io::Write::write_all(&mut file, conf.as_bytes()).expect("configure TLS");
        }
        let mut last_log = String::new();
        for _ in 0..3 {
            let mut server = Self {
                child: None,
                bin: bin.clone(),
                port: free_port(),
                dir,
            };
            server.spawn();
            if server.ready().await {
                return server;
            }
            // Most likely another process took the port between the probe and the bind.
            last_log = server.log();
            server.stop();
            dir = std::mem::replace(&mut server.dir, tempfile::tempdir().expect("a folder"));
        }
        panic!(
            "the private PostgreSQL server (binaries in {}) did not start within {STARTUP:?}; \
             its log:\n{last_log}",
            bin.display()
        );
    }

    /// `postgres://postgres@HOST:PORT/postgres` plus `query` (without `?`) when not empty.
    pub fn url(&self, host: &str, query: &str) -> String {
        let url = format!("postgres://postgres@{host}:{}/postgres", self.port);
        if query.is_empty() {
            url
        } else {
            format!("{url}?{query}")
        }
    }

    /// The folder holding the server's files; a test may write its own files there.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A plain (non-TLS) superuser connection, its connection task spawned.
    pub async fn admin(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url("127.0.0.1", ""), NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to the private server: {e}"));
        tokio::spawn(connection);
        client
    }

    /// What the server wrote to its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    fn spawn(&mut self) {
        let dir = self.dir.path();
        let log = std::fs::File::create(dir.join("server.log")).expect("the server log");
        let mut command = as_server_user(&self.bin.join("postgres"));
        command
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]);
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the server log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", self.bin.display()));
        self.child = Some(child);
    }

    /// Waits until the server accepts a connection, or it exited, or [`STARTUP`] passed.
    async fn ready(&mut self) -> bool {
        let deadline = Instant::now() + STARTUP;
        let url = self.url("127.0.0.1", "connect_timeout=2");
        while Instant::now() < deadline {
            if let Ok((client, connection)) = tokio_postgres::connect(&url, NoTls).await {
                drop(connection);
                drop(client);
                return true;
            }
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| c.try_wait().ok().flatten().is_some());
            if exited {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`: the data is thrown away anyway).
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let stopped = as_server_user(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !stopped {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The folder of `initdb`, `postgres` and `pg_ctl`.
fn server_binaries() -> PathBuf {
    if let Ok(bin) = std::env::var("TURNSTILE_TEST_PG_BIN") {
        return PathBuf::from(bin);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version);
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL's server binaries (initdb, postgres, pg_ctl) are not installed under \
             /usr/lib/postgresql/*/bin: install them (apt-get install postgresql) or set \
             TURNSTILE_TEST_PG_BIN to their folder. This test needs a private server of its own."
        ),
    }
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe socket");
    listener.local_addr().expect("probe address").port()
}

/// Whether this process runs as root (PostgreSQL then needs another user).
fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `program`, run as the `postgres` user when this process is root.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// As root, gives `dir` and everything in it to the `postgres` user.
fn hand_to_server_user(dir: &Path) {
    if is_root() {
        run_to_end(
            Command::new("chown").args(["-R", "postgres:"]).arg(dir),
            "chown to the postgres user (does the user exist? it comes with the postgresql package)",
        );
    }
}

/// Writes `text` to `path`, readable by its owner only (PostgreSQL insists for a key).
fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write a certificate file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .expect("restrict a certificate file");
}

/// Runs `command` to its end; fails the test with its output if it fails.
fn run_to_end(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not run it: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
