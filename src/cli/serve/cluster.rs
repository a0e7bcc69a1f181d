//! `serve --cluster`: the address this process advertises to the others, and the check that
//! the store is one they share.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::Uri;
use turnstile::backend::StoreUrl;
use turnstile::config::Ownership;
use turnstile::Store;

use super::ServeArgs;

/// Ownership settings known before the listener is bound.
pub(super) struct PendingOwnership {
    /// `--advertise`, checked; `None`: the bound address.
    advertise: Option<String>,
    lease_ttl: Duration,
}

impl PendingOwnership {
    /// The ownership of a process listening on `local`.
    pub(super) fn advertising(self, local: SocketAddr) -> Ownership {
        let address = self.advertise.unwrap_or_else(|| format!("http://{local}"));
        Ownership::new(address).with_lease_ttl(self.lease_ttl)
    }
}

/// `None` without `--cluster`; else the checked `--advertise` and `--lease-ttl`.
pub(super) fn cluster_ownership(args: &ServeArgs) -> Result<Option<PendingOwnership>, String> {
    if !args.cluster {
        return Ok(None);
    }
    let lease_ttl = super::seconds(args.lease_ttl, "--lease-ttl")?;
    let advertise = match &args.advertise {
        Some(url) => Some(advertised_url(url)?),
        None if args.addr.ip().is_unspecified() => {
            return Err(format!(
                "--cluster needs --advertise http://HOST:PORT when listening on {}: the other \
                 processes cannot reach an unspecified address, so say which one they should use",
                args.addr
            ))
        }
        None => None,
    };
    Ok(Some(PendingOwnership {
        advertise,
        lease_ttl,
    }))
}

/// Checks an `--advertise` URL: `http://HOST[:PORT]`, nothing after the authority. Returns it
/// without a trailing `/`.
fn advertised_url(url: &str) -> Result<String, String> {
    let refuse = |why: &str| {
        Err(format!(
            "--advertise {url:?} {why}; expected http://HOST:PORT, the address other processes \
             reach this one at"
        ))
    };
    let Ok(uri) = url.parse::<Uri>() else {
        return refuse("is not a URL");
    };
    if uri.scheme_str() != Some("http") {
        return refuse(
            "does not start with http:// (processes forward to each other in plain HTTP)",
        );
    }
    match uri.authority() {
        None => return refuse("names no host"),
        Some(authority) if authority.as_str().contains('@') => {
            return refuse("carries credentials")
        }
        Some(_) => {}
    }
    if uri.path() != "/" && !uri.path().is_empty() || uri.query().is_some() {
        return refuse("has a path or query");
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// Refuses a store that other processes cannot share, or that keeps no leases.
pub(super) fn shared_store(url: &StoreUrl, store: &dyn Store) -> Result<(), String> {
    let why = match url {
        StoreUrl::Memory => Some("lives in this process's memory"),
        _ if store.leases().is_none() => Some("keeps no session leases"),
        _ => None,
    };
    match why {
        Some(why) => Err(format!(
            "--cluster needs a store that every process shares and that keeps session leases; \
             the {} store {why}. Stores that do: redis://HOST:PORT, \
             redis+cluster://HOST:PORT[,HOST:PORT…], postgres://USER@HOST/DB",
            store.name()
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_urls_are_plain_http_authorities() {
        assert_eq!(
            advertised_url("http://10.0.0.7:8080/").as_deref(),
            Ok("http://10.0.0.7:8080")
        );
        assert_eq!(
            advertised_url("http://node-1:8080").as_deref(),
            Ok("http://node-1:8080")
        );
        for bad in [
            "10.0.0.7:8080",
            "https://10.0.0.7:8080",
            "http://10.0.0.7:8080/api",
            "http://u:p@10.0.0.7:8080",
            "http://10.0.0.7:8080/?x=1",
            "http://",
        ] {
            assert!(advertised_url(bad).is_err(), "{bad} was accepted");
        }
    }
}
