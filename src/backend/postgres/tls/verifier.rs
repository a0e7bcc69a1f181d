//! The rustls client of each `sslmode`: rustls' own verifier for `verify-full`, and for the
//! modes that check less, one that checks the chain only (`verify-ca`) or nothing (`prefer`,
//! `require`) while still verifying that the handshake is signed by the certificate's key.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::Check;
use crate::store::StoreError;

/// A rustls client that checks what `check` says against `roots`.
pub(super) fn client_config(
    check: Check,
    roots: RootCertStore,
) -> Result<ClientConfig, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::InvalidRequest(format!("postgres TLS: {e}")))?;
    let config = match check {
        // rustls' own verifier: chain, validity, host name.
        Check::ChainAndName => builder.with_root_certificates(roots),
        Check::Chain | Check::Nothing => {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Verifier {
                    roots: (check == Check::Chain).then(|| Arc::new(roots)),
                    algorithms: provider.signature_verification_algorithms,
                }))
        }
    };
    Ok(config.with_no_client_auth())
}

/// Checks a server's certificate chain (`verify-ca`, `require` with `sslrootcert`) or nothing
/// of it (`prefer`, `require`); the handshake must still be signed by the certificate's key.
#[derive(Debug)]
struct Verifier {
    /// The trusted roots; `None` checks no chain.
    roots: Option<Arc<RootCertStore>>,
    /// The provider's signature algorithms.
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
