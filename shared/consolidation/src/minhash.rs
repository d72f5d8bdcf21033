//! MinHash signatures and LSH banding: the candidate search for near-duplicate folding in
//! openwop-agent-memory.md §"Background consolidation (RFC 0068)" ("merge duplicates").
//!
//! A pass must not compare every pair of entries (a 100,000-entry corpus would be 5·10⁹ pairs),
//! so candidates are the pairs whose MinHash signatures agree on at least one LSH band; only
//! those are verified with the exact Jaccard similarity and the guard.
//!
//! Parameters: [`NUM_HASHES`] = 32 min-hashes cut into [`BANDS`] = 16 bands of [`ROWS`] = 2.
//! A pair with shingle Jaccard `s` becomes a candidate with probability `1 - (1 - s²)^16`:
//! 0.9993 at `s = 0.6` (the default threshold), 0.99998 at 0.7, 0.99 at 0.5, 0.78 at 0.3. The
//! banding is deliberately recall-heavy because buckets are additionally keyed by the guard
//! fingerprint (see `crate::cluster`), so a bucket only ever holds texts with the same content
//! words, and extra candidates cost one cheap set comparison each.
//!
//! Every hash here is a fixed function (FNV-1a followed by the MurmurHash3 finaliser for
//! tokens and shingles, multiply-add functions with constants from a fixed SplitMix64 stream for
//! the min-hashes), never `std`'s `DefaultHasher` whose output may change
//! between Rust releases: whether a pair is a candidate must depend only on the two texts, so
//! that a second pass, months and compiler upgrades later, finds exactly the pairs the first
//! pass found (the idempotency argument in the crate documentation relies on it).

/// Number of min-hash functions per signature.
pub const NUM_HASHES: usize = 32;
/// Number of LSH bands.
pub const BANDS: usize = 16;
/// Rows (min-hashes) per band.
pub const ROWS: usize = NUM_HASHES / BANDS;

const _: () = assert!(BANDS * ROWS == NUM_HASHES);

/// MurmurHash3's 64-bit finaliser: a bijective, well-mixing scramble.
pub(crate) const fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// FNV-1a over the bytes, finalised with [`fmix64`]. Stable across platforms and releases.
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    fmix64(h)
}

/// `NUM_HASHES` values from a fixed SplitMix64 stream; `odd` forces the lowest bit.
const fn splitmix_stream(mut state: u64, odd: bool) -> [u64; NUM_HASHES] {
    let mut out = [0u64; NUM_HASHES];
    let mut i = 0;
    while i < NUM_HASHES {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        out[i] = fmix64(state) | (odd as u64);
        i += 1;
    }
    out
}

/// Multipliers (odd, so each function is a bijection of `u64`) and offsets of the min-hash
/// family `h_i(x) = a_i·x + b_i (mod 2^64)`, applied to shingle fingerprints that are already
/// uniformly mixed: one multiply-add per function and shingle, the standard universal family
/// for MinHash.
const MULTIPLIERS: [u64; NUM_HASHES] = splitmix_stream(0x776f_702d_6d65_6d6f, true); // "wop-memo"
const OFFSETS: [u64; NUM_HASHES] = splitmix_stream(0x6d69_6e68_6173_6821, false); // "minhash!"

/// A MinHash signature.
pub(crate) type Signature = [u64; NUM_HASHES];

/// The MinHash signature of a shingle-fingerprint set. The empty set gets the all-`MAX`
/// signature (it can only ever be a candidate of another empty set).
pub(crate) fn signature(shingles: &[u64]) -> Signature {
    let mut sig = [u64::MAX; NUM_HASHES];
    for &s in shingles {
        for ((slot, a), b) in sig.iter_mut().zip(&MULTIPLIERS).zip(&OFFSETS) {
            let v = a.wrapping_mul(s).wrapping_add(*b);
            if v < *slot {
                *slot = v;
            }
        }
    }
    sig
}

/// The bucket key of band `band` of a signature.
pub(crate) fn band_key(sig: &Signature, band: usize) -> u64 {
    let start = band * ROWS;
    let mut h = fmix64(band as u64 ^ 0x243f_6a88_85a3_08d3);
    for v in &sig[start..start + ROWS] {
        h = fmix64(h ^ v).wrapping_add(0x1319_8a2e_0370_7344);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_pinned() {
        // Pinned values: a change here silently changes which pairs a pass considers, so it
        // must be a deliberate, versioned decision (see the module documentation).
        assert_eq!(hash_bytes(b""), fmix64(0xcbf2_9ce4_8422_2325));
        assert_eq!(hash_bytes(b"tea"), 0x274e_6f33_c949_7c61);
        assert_eq!(MULTIPLIERS[0], 0xc9ed_f676_6df4_adf1);
        assert_eq!(signature(&[1, 2, 3])[0], 0x6a76_9fa5_0f4e_226c);
        assert_ne!(hash_bytes(b"tea"), hash_bytes(b"tee"));
        assert_eq!(
            MULTIPLIERS[0],
            fmix64(0x776f_702d_6d65_6d6f_u64.wrapping_add(0x9e37_79b9_7f4a_7c15)) | 1
        );
        assert!(MULTIPLIERS.iter().all(|a| a % 2 == 1));
    }

    #[test]
    fn identical_sets_share_every_band() {
        let a = signature(&[1, 2, 3, 4]);
        let b = signature(&[4, 3, 2, 1]);
        for band in 0..BANDS {
            assert_eq!(band_key(&a, band), band_key(&b, band));
        }
    }

    #[test]
    fn signature_agreement_tracks_jaccard() {
        // Two sets with Jaccard 0.5: about half the min-hashes agree.
        let a: Vec<u64> = (0..200).map(fmix64).collect();
        let b: Vec<u64> = (67..267).map(fmix64).collect();
        let (mut a, mut b) = (a, b);
        a.sort_unstable();
        b.sort_unstable();
        let (sa, sb) = (signature(&a), signature(&b));
        let agree = sa.iter().zip(sb.iter()).filter(|(x, y)| x == y).count();
        assert!((8..=24).contains(&agree), "agree = {agree}");
    }
}
