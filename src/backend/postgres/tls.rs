//! TLS for the PostgreSQL store: libpq's `sslmode` and `sslrootcert`, on rustls with the `ring`
//! provider.
//!
//! What each mode checks (as libpq does, with the differences written in `docs/stores.md`):
//!
//! | `sslmode` | TLS | server certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it, else plaintext | not checked |
//! | `require` | always | not checked; with `sslrootcert`, checked as `verify-ca` |
//! | `verify-ca` | always | signed by the CA in `sslrootcert` (required: refused without it) |
//! | `verify-full` | always | signed by a trusted root and naming the host |
//!
//! Trusted roots: the PEM file `sslrootcert` names, else Mozilla's roots built into the binary
//! (`webpki-roots`; also what `sslrootcert=system` means here). Even an unchecked certificate
//! must sign the handshake with its own key.

mod verifier;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;
use tokio_postgres_rustls::MakeRustlsConnect;

use self::verifier::client_config;
use super::PostgresStore;
use crate::store::StoreError;

/// How a connection to PostgreSQL uses TLS: libpq's `sslmode` (`allow` excepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it (its certificate unchecked), plaintext when it does not:
    /// protects against a passive listener only. libpq's default, and turnstile's.
    Prefer,
    /// Always TLS, refusing a server without it; the certificate is not checked unless
    /// `sslrootcert` is given (then as [`SslMode::VerifyCa`], as libpq does).
    Require,
    /// Always TLS; the certificate must be signed by a trusted root (the host name is not
    /// checked).
    VerifyCa,
    /// Always TLS; the certificate must be signed by a trusted root and name the host
    /// connected to (a DNS name, or an IP address in its subject alternative names).
    VerifyFull,
}

impl SslMode {
    /// The spelling in a URL: `disable`, `prefer`, `require`, `verify-ca`, `verify-full`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// What the driver does before the handshake: ask for TLS or not, and insist or not.
    fn driver(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Driver;
        match self {
            Self::Disable => Driver::Disable,
            Self::Prefer => Driver::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => Driver::Require,
        }
    }

    /// The mode a key=value connection string (`host=h sslmode=require`) gave the driver, which
    /// parses those itself; `None` for its default (`prefer`), which says nothing.
    pub(super) fn chosen_in(config: &tokio_postgres::Config) -> Option<Self> {
        use tokio_postgres::config::SslMode as Driver;
        match config.get_ssl_mode() {
            Driver::Disable => Some(Self::Disable),
            Driver::Require => Some(Self::Require),
            _ => None,
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = StoreError;

    /// Parses libpq's spellings. `allow` (plaintext first, TLS only if the server insists) is
    /// refused with a message naming the modes that exist, as is anything else.
    fn from_str(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            "allow" => {
                return Err(StoreError::InvalidRequest(
                    "postgres sslmode \"allow\" is not supported (it tries plaintext first); \
                     use disable, prefer, require, verify-ca or verify-full"
                        .into(),
                ))
            }
            other => {
                return Err(StoreError::InvalidRequest(format!(
                    "postgres sslmode {other:?} is not one of disable, prefer, require, \
                     verify-ca, verify-full"
                )))
            }
        })
    }
}

/// Where the roots that vouch for a server's certificate come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) enum RootCert {
    /// None named: Mozilla's roots, built in.
    #[default]
    BuiltIn,
    /// `sslrootcert=system`: libpq's spelling for "the roots everyone trusts"; here the same
    /// built-in set, and (as in libpq) only with `verify-full`.
    System,
    /// A PEM file of one or more certificates.
    File(PathBuf),
}

impl RootCert {
    /// Reads `sslrootcert`'s value: `system`, or a path (`./system` for a file of that name).
    pub(super) fn parse(value: impl Into<PathBuf>) -> Self {
        let path = value.into();
        if path == Path::new("system") {
            Self::System
        } else {
            Self::File(path)
        }
    }
}

/// The TLS side of a store's connections: the mode in effect and the connector the pool uses.
#[derive(Clone)]
pub(super) struct Tls {
    /// The mode in effect (the given one, or the default).
    pub mode: SslMode,
    /// Hands the driver a rustls client per connection.
    pub connector: MakeRustlsConnect,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).finish()
    }
}

/// What is checked of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Nothing beyond the handshake's signature.
    Nothing,
    /// The chain up to a trusted root.
    Chain,
    /// The chain and the host name.
    ChainAndName,
}

impl Tls {
    /// The mode in effect for `mode` (if given) and `root`, and the connector for it; reads
    /// the `sslrootcert` file when the mode checks certificates.
    ///
    /// Fails with [`StoreError::InvalidRequest`] naming the parameter for a combination libpq
    /// refuses too, or a file that holds no usable certificate, and [`StoreError::Io`] for a
    /// file that cannot be read.
    pub(super) async fn configure(
        mode: Option<SslMode>,
        root: &RootCert,
    ) -> Result<Self, StoreError> {
        let mode = match (mode, root) {
            (None, RootCert::System) => SslMode::VerifyFull,
            (None, _) => SslMode::Prefer,
            (Some(mode), RootCert::System) if mode != SslMode::VerifyFull => {
                return Err(StoreError::InvalidRequest(format!(
                    "postgres sslrootcert=system needs sslmode=verify-full (the default with it), \
                     not sslmode={mode}: trusting the public roots means nothing unless the \
                     host name is checked"
                )))
            }
            // libpq would look for ~/.postgresql/root.crt and fail without it; the public roots
            // would accept any certificate a public CA signed, for any host.
            (Some(SslMode::VerifyCa), RootCert::BuiltIn) => {
                return Err(StoreError::InvalidRequest(
                    "postgres sslmode=verify-ca needs sslrootcert=PATH naming the CA that signed \
                     the server's certificate: without a host name check, the built-in public \
                     roots would accept any certificate a public CA signed (use verify-full to \
                     check against them)"
                        .into(),
                ))
            }
            (Some(mode), _) => mode,
        };
        let check = match (mode, root) {
            (SslMode::Disable | SslMode::Prefer, _) => Check::Nothing,
            (SslMode::Require, RootCert::File(_)) | (SslMode::VerifyCa, _) => Check::Chain,
            (SslMode::Require, _) => Check::Nothing,
            (SslMode::VerifyFull, _) => Check::ChainAndName,
        };
        let roots = match (check, root) {
            (Check::Nothing, _) => RootCertStore::empty(),
            (_, RootCert::File(path)) => read_roots(path).await?,
            (_, RootCert::BuiltIn | RootCert::System) => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        Ok(Self {
            mode,
            connector: MakeRustlsConnect::new(client_config(check, roots)?),
        })
    }

    /// What the driver does before the handshake, connecting to `hosts`: nothing over Unix
    /// sockets, which PostgreSQL never encrypts (libpq ignores `sslmode` there too).
    pub(super) fn driver_mode(
        &self,
        hosts: &[tokio_postgres::config::Host],
    ) -> tokio_postgres::config::SslMode {
        if !hosts.is_empty() && hosts.iter().all(is_socket) {
            tokio_postgres::config::SslMode::Disable
        } else {
            self.mode.driver()
        }
    }
}

/// Reads the roots of a PEM file: every `CERTIFICATE` in it.
async fn read_roots(path: &Path) -> Result<RootCertStore, StoreError> {
    let pem = tokio::fs::read(path)
        .await
        .map_err(|source| StoreError::Io {
            op: "read the postgres sslrootcert",
            path: path.to_owned(),
            source,
        })?;
    let invalid = |detail: String| {
        StoreError::InvalidRequest(format!("postgres sslrootcert {}: {detail}", path.display()))
    };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not a PEM file of certificates ({e})")))?;
    if certs.is_empty() {
        return Err(invalid(
            "holds no certificate (no -----BEGIN CERTIFICATE----- block)".into(),
        ));
    }
    let mut roots = RootCertStore::empty();
    for (n, cert) in certs.into_iter().enumerate() {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("certificate #{} cannot be a root: {e}", n + 1)))?;
    }
    Ok(roots)
}

impl PostgresStore {
    /// Under `sslmode=prefer`, says in the log when the server offered no TLS, so that a
    /// connection to another host is never plaintext without a trace.
    pub(super) async fn warn_if_plaintext(&self) {
        let statement = "SELECT coalesce(\
            (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)";
        match self.read("tls", statement, &[]).await {
            Ok(rows) if rows.first().is_some_and(|row| !row.get::<_, bool>(0)) => {
                tracing::warn!(
                    "postgres store: the server offered no TLS, so connections are plaintext \
                     (sslmode=prefer); set sslmode=verify-full (or require) to refuse that"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, "postgres store: could not read pg_stat_ssl"),
        }
    }
}

/// Whether `host` is this machine: a Unix socket, `localhost` or a loopback address.
pub(super) fn is_local(host: &tokio_postgres::config::Host) -> bool {
    match host {
        tokio_postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .trim_matches(|c| c == '[' || c == ']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(_) => true,
    }
}

/// Whether `host` is a Unix socket.
fn is_socket(host: &tokio_postgres::config::Host) -> bool {
    match host {
        tokio_postgres::config::Host::Tcp(_) => false,
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(_) => true,
    }
}

/// A hint for a connection error under `mode`, when the error is TLS's: what to change.
pub(super) fn hint(mode: SslMode, error: &tokio_postgres::Error) -> Option<String> {
    match refused_certificate(error) {
        Some(
            rustls::CertificateError::NotValidForName
            | rustls::CertificateError::NotValidForNameContext { .. },
        ) => {
            return Some(format!(
                "the server's TLS certificate does not name the host in the URL \
                 (sslmode={mode} checks it; verify-ca does not)"
            ))
        }
        Some(_) => {
            return Some(format!(
                "the server's TLS certificate was refused (sslmode={mode}): check that \
                 sslrootcert names the certificate authority that signed it (without \
                 sslrootcert, only the public roots built into turnstile are trusted)"
            ))
        }
        None => {}
    }
    // The driver's words when the server answers that it has no TLS (in a cause of the error).
    let mut causes =
        std::iter::successors(Some(error as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        });
    causes
        .any(|e| e.to_string().contains("server does not support TLS"))
        .then(|| {
            format!(
                "sslmode={mode} refuses to connect without TLS: turn ssl on in the server, or \
                 allow plaintext with sslmode=prefer or disable"
            )
        })
}

/// Why rustls refused the server's certificate, if it did, somewhere in `error`'s causes.
fn refused_certificate(error: &tokio_postgres::Error) -> Option<&rustls::CertificateError> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = cause {
        // An `io::Error` hides what it wraps from `source()`; look inside it.
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        for candidate in [Some(e), inner].into_iter().flatten() {
            if let Some(rustls::Error::InvalidCertificate(why)) =
                candidate.downcast_ref::<rustls::Error>()
            {
                return Some(why);
            }
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_and_bad_ones_name_the_parameter() {
        for mode in [
            SslMode::Disable,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            assert_eq!(mode.as_str().parse::<SslMode>().unwrap(), mode);
        }
        for bad in ["", "Require", "verify_full", "allow", "on"] {
            let err = bad.parse::<SslMode>().unwrap_err();
            assert!(matches!(err, StoreError::InvalidRequest(_)), "{err}");
            assert!(err.to_string().contains("sslmode"), "{err}");
        }
    }

    #[test]
    fn system_roots_are_a_word_and_anything_else_a_path() {
        assert_eq!(RootCert::parse("system"), RootCert::System);
        assert_eq!(
            RootCert::parse("./system"),
            RootCert::File("./system".into())
        );
    }

    #[tokio::test]
    async fn the_default_is_prefer_and_verify_full_with_system_roots() {
        let tls = Tls::configure(None, &RootCert::BuiltIn).await.unwrap();
        assert_eq!(tls.mode, SslMode::Prefer);
        let tls = Tls::configure(None, &RootCert::System).await.unwrap();
        assert_eq!(tls.mode, SslMode::VerifyFull);
        let err = Tls::configure(Some(SslMode::Require), &RootCert::System)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("sslrootcert=system"), "{err}");
        // A mode that checks nothing reads no file: libpq ignores sslrootcert there too.
        let missing = RootCert::File("/nonexistent/ca.pem".into());
        assert!(Tls::configure(Some(SslMode::Prefer), &missing)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn unix_sockets_are_never_asked_for_tls() {
        use tokio_postgres::config::SslMode as Driver;
        let tls = Tls::configure(Some(SslMode::VerifyFull), &RootCert::BuiltIn)
            .await
            .unwrap();
        let hosts = |conninfo: &str| {
            tokio_postgres::Config::from_str(conninfo)
                .unwrap()
                .get_hosts()
                .to_vec()
        };
        assert_eq!(
            tls.driver_mode(&hosts("host=/run/postgresql")),
            Driver::Disable
        );
        assert_eq!(tls.driver_mode(&hosts("host=db.internal")), Driver::Require);
        assert_eq!(
            tls.driver_mode(&hosts("host=/run/postgresql,db.internal")),
            Driver::Require
        );
    }

    #[tokio::test]
    async fn a_root_file_that_is_missing_or_holds_no_certificate_is_refused() {
        let missing = RootCert::File("/nonexistent/ca.pem".into());
        let err = Tls::configure(Some(SslMode::VerifyFull), &missing)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Io { ref path, .. } if path == Path::new("/nonexistent/ca.pem")),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = Tls::configure(Some(SslMode::VerifyCa), &RootCert::File(empty))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidRequest(ref m) if m.contains("sslrootcert") && m.contains("no certificate")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn verify_ca_without_a_root_file_is_refused() {
        let Err(err) = Tls::configure(Some(SslMode::VerifyCa), &RootCert::BuiltIn).await else {
            panic!("verify-ca without sslrootcert was accepted");
        };
        assert!(
            matches!(err, StoreError::InvalidRequest(ref m) if m.contains("verify-ca") && m.contains("sslrootcert")),
            "{err}"
        );
        assert!(
            Tls::configure(Some(SslMode::VerifyFull), &RootCert::BuiltIn)
                .await
                .is_ok()
        );
    }

    #[test]
    fn a_key_value_string_keeps_the_mode_it_names() {
        let chosen = |conninfo: &str| {
            let config: tokio_postgres::Config = conninfo.parse().expect("conninfo");
            SslMode::chosen_in(&config)
        };
        assert_eq!(chosen("host=h sslmode=require"), Some(SslMode::Require));
        assert_eq!(chosen("host=h sslmode=disable"), Some(SslMode::Disable));
        assert_eq!(chosen("host=h"), None);
    }
}
