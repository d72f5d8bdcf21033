//! The host's Ed25519 identity (OAP RFC 0010 §3.4 "signature", §5.1 rotatable signing keys): it
//! signs grants and receipts, and its public half is published as a `did:web` document so a
//! grantee verifies both without asking us. Signatures follow `oap-sdk`'s `sign_ed25519`: the
//! key signs the canonical JSON of the payload and the signature travels as standard base64.
//!
//! The seed comes from the deployment's managed secret store (memory-aws `exchange`); it is
//! never logged, and `Debug` prints the DID only.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use serde_json::{json, Value};

use crate::canonical::canonicalize;
use crate::error::ExchangeError;

/// Fragment of the verification method, as `oap-sdk` names it.
pub const KEY_FRAGMENT: &str = "oap-signing";

/// The host's signing identity: its DID and key pair.
pub struct HostKey {
    did: String,
    pair: Ed25519KeyPair,
    /// Keys the salts of item chains' first links (crate::item): derived from the seed, so every
    /// instance of the function derives the same salts, and never shown.
    salt_key: ring::hmac::Key,
}

impl std::fmt::Debug for HostKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostKey").field("did", &self.did).finish()
    }
}

impl HostKey {
    /// The key of a 32-byte Ed25519 seed.
    pub fn from_seed(did: &str, seed: &[u8]) -> Result<Self, ExchangeError> {
        if !did.starts_with("did:web:") || did.len() <= "did:web:".len() {
            return Err(ExchangeError::Config("the host DID must be a did:web DID"));
        }
        let pair = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| ExchangeError::Config("the signing seed must be 32 bytes"))?;
        let mut salt_seed = b"wop-memory/oap/chain-salt/v1\0".to_vec();
        salt_seed.extend_from_slice(seed);
        let salt_key = ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            ring::digest::digest(&ring::digest::SHA256, &salt_seed).as_ref(),
        );
        Ok(HostKey {
            did: did.to_owned(),
            pair,
            salt_key,
        })
    }

    /// The seed a secret holds: 64 hex characters are the seed itself; any other text of at
    /// least 32 characters (what a secret store generates) is hashed into one, so an operator
    /// can let the store generate the secret.
    pub fn decode_seed(text: &str) -> Result<Vec<u8>, ExchangeError> {
        let text = text.trim();
        if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| ExchangeError::Config("the signing seed is not hex"));
        }
        if text.chars().count() < 32 {
            return Err(ExchangeError::Config(
                "the signing secret must be 64 hex characters or at least 32 characters of text",
            ));
        }
        let mut material = b"wop-memory/oap/seed/v1\0".to_vec();
        material.extend_from_slice(text.as_bytes());
        Ok(ring::digest::digest(&ring::digest::SHA256, &material)
            .as_ref()
            .to_vec())
    }

    pub fn did(&self) -> &str {
        &self.did
    }

    /// `{did}#oap-signing`: who a signature is by.
    pub fn key_id(&self) -> String {
        format!("{}#{KEY_FRAGMENT}", self.did)
    }

    /// The salt of the first link of an item's chain: 16 bytes only this host can derive.
    pub fn chain_salt(&self, scope_id: &str, item_id: &str) -> [u8; 16] {
        let tag = ring::hmac::sign(&self.salt_key, format!("{scope_id}\0{item_id}").as_bytes());
        let mut salt = [0u8; 16];
        salt.copy_from_slice(&tag.as_ref()[..16]);
        salt
    }

    /// Base64 signature over the canonical JSON of `payload`.
    pub fn sign(&self, payload: &Value) -> String {
        STANDARD.encode(self.pair.sign(canonicalize(payload).as_bytes()).as_ref())
    }

    /// Whether `signature` (base64) is this key's over the canonical JSON of `payload`.
    pub fn verifies(&self, payload: &Value, signature: &str) -> bool {
        STANDARD.decode(signature).is_ok_and(|sig| {
            UnparsedPublicKey::new(&ED25519, self.pair.public_key().as_ref())
                .verify(canonicalize(payload).as_bytes(), &sig)
                .is_ok()
        })
    }

    /// The public key as an OKP JWK, as `oap-sdk`'s `SigningKeys.public_jwk`.
    pub fn public_jwk(&self) -> Value {
        json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": URL_SAFE_NO_PAD.encode(self.pair.public_key().as_ref()),
        })
    }

    /// The `did:web` document (`/.well-known/did.json`) in the shape `oap-sdk`'s
    /// `build_did_document` gives, with this door's endpoint as the service.
    pub fn did_document(&self, base_url: &str) -> Value {
        let mut jwk = self.public_jwk();
        jwk["alg"] = json!("EdDSA");
        jwk["use"] = json!("sig");
        jwk["kid"] = json!(KEY_FRAGMENT);
        json!({
            "@context": [
                "https://www.w3.org/ns/did/v1",
                "https://w3id.org/security/suites/jws-2020/v1",
            ],
            "id": self.did,
            "verificationMethod": [{
                "id": self.key_id(),
                "type": "JsonWebKey2020",
                "controller": self.did,
                "publicKeyJwk": jwk,
            }],
            "assertionMethod": [self.key_id()],
            "authentication": [self.key_id()],
            "service": [{
                "id": format!("{}#oap-memory", self.did),
                "type": "OAPMemoryExchange",
                "serviceEndpoint": format!("{base_url}/.well-known/oap-memory.json"),
            }],
        })
    }

    /// A compact JWS (RFC 7515, `alg: EdDSA`) whose payload is `payload`'s canonical JSON: the
    /// bearer form of a grant.
    pub fn compact_jws(&self, payload: &Value) -> String {
        let header = json!({"alg": "EdDSA", "kid": self.key_id(), "typ": "JWT"});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(canonicalize(&header)),
            URL_SAFE_NO_PAD.encode(canonicalize(payload))
        );
        let sig = self.pair.sign(signing_input.as_bytes());
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    /// The payload of a compact JWS this key signed, or `None` for anything else: a token of
    /// another key, a changed byte anywhere, or not a JWS at all.
    pub fn open_jws(&self, token: &str) -> Option<Value> {
        let mut parts = token.split('.');
        let (header, payload, sig) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
        UnparsedPublicKey::new(&ED25519, self.pair.public_key().as_ref())
            .verify(format!("{header}.{payload}").as_bytes(), &sig)
            .ok()?;
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        if header.get("alg").and_then(Value::as_str) != Some("EdDSA") {
            return None;
        }
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> HostKey {
        HostKey::from_seed("did:web:memory.example", &[7u8; 32]).unwrap()
    }

    #[test]
    fn signatures_verify_and_changes_break_them() {
        let k = key();
        let doc = json!({"a": 1, "b": "x"});
        let sig = k.sign(&doc);
        assert!(k.verifies(&doc, &sig));
        assert!(!k.verifies(&json!({"a": 2, "b": "x"}), &sig));
        assert!(!k.verifies(&doc, "bm90IGEgc2ln"));
    }

    #[test]
    fn jws_round_trips_and_any_changed_byte_is_refused() {
        let k = key();
        let payload = json!({"grant_id": "mgr_1", "max_items": 5});
        let token = k.compact_jws(&payload);
        assert_eq!(k.open_jws(&token), Some(payload));
        for i in 0..token.len() {
            let mut bytes = token.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            if let Ok(t) = String::from_utf8(bytes) {
                if t != token {
                    assert_eq!(k.open_jws(&t), None, "byte {i}");
                }
            }
        }
        let other = HostKey::from_seed("did:web:memory.example", &[8u8; 32]).unwrap();
        assert_eq!(other.open_jws(&token), None);
    }

    #[test]
    fn seeds_are_hex_or_derived_from_long_text() {
        assert_eq!(
            HostKey::decode_seed(&"ab".repeat(32)).unwrap(),
            vec![0xab; 32]
        );
        let derived = HostKey::decode_seed(&"Zq".repeat(20)).unwrap();
        assert_eq!(derived.len(), 32);
        assert_ne!(derived, HostKey::decode_seed(&"Zr".repeat(20)).unwrap());
        assert!(HostKey::decode_seed("abcd").is_err());
        assert!(HostKey::from_seed("did:key:x", &[0; 32]).is_err());
    }

    #[test]
    fn debug_shows_no_key_material() {
        let shown = format!("{:?}", key());
        assert!(shown.contains("did:web:memory.example"));
        assert!(!shown.contains("pair"));
    }
}
