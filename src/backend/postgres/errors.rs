//! The PostgreSQL kit's errors: what the driver and the pool say, as the families' errors
//! (`Unavailable` for anything the server or the network says), with a hint when a TLS
//! handshake was refused.

use super::SslMode;
use crate::store::StoreError;

pub(crate) fn unavailable(detail: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable {
        backend: "postgres",
        detail: detail.to_string(),
    }
}

/// Maps a driver error. Everything the server or the network says is `Unavailable`: a lost
/// connection, a server shutting down, a deadlock or a timeout — the call did not (or may not)
/// take effect, and a retry after reloading is the remedy.
pub fn pg_error(about: &str, e: tokio_postgres::Error) -> StoreError {
    let detail = match e.as_db_error() {
        Some(db) if connection_lost(&e) => {
            format!(
                "{about}: the server dropped the connection: {} ({}); the pool opens a new one",
                db.message(),
                db.code().code()
            )
        }
        Some(db) => format!("{about}: {} ({})", db.message(), db.code().code()),
        None if e.is_closed() => format!("{about}: the connection was closed ({e})"),
        // The driver's own message ("error connecting to server") leaves the cause to its source.
        None => match std::error::Error::source(&e) {
            Some(cause) => format!("{about}: {e}: {cause}"),
            None => format!("{about}: {e}"),
        },
    };
    unavailable(detail)
}

/// Whether `e` means the connection is gone: closed under the client, or the server ending it
/// (SQLSTATE class 57P: shutdown, restart, terminated; class 08: connection exceptions).
pub(crate) fn connection_lost(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.as_db_error().is_some_and(|db| {
            let code = db.code().code();
            code.starts_with("57P") || code.starts_with("08")
        })
}

/// Maps a pool error (no connection within the timeout, or the connection attempt failed); a
/// failed TLS handshake under `ssl_mode` says what to change.
pub(crate) fn pool_error(e: deadpool_postgres::PoolError, ssl_mode: SslMode) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => match super::tls::hint(ssl_mode, &e) {
            Some(hint) => match pg_error("connecting", e) {
                StoreError::Unavailable { backend, detail } => StoreError::Unavailable {
                    backend,
                    detail: format!("{detail}; {hint}"),
                },
                other => other,
            },
            None => pg_error("connecting", e),
        },
        other => unavailable(format!("no connection: {other}")),
    }
}
