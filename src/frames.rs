//! Length-prefixed frames: the one wire and file format for several byte strings at once
//! (requests to the LLVM helper and to the libNVVM child, the daemon's socket, cache
//! entries). Each frame is a name and its bytes, each written as a little-endian u64
//! length and the bytes; reading checks every length against what is left.

use crate::diag::{Error, Result};

/// (name, data) pairs, back to back.
pub fn encode<'a>(frames: impl Iterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in frames {
        for part in [name.as_bytes(), data] {
            out.extend_from_slice(&(part.len() as u64).to_le_bytes());
            out.extend_from_slice(part);
        }
    }
    out
}

/// The (name, data) pairs of an encoded body; lengths are never trusted.
pub fn decode(mut body: &[u8]) -> Result<Vec<(String, &[u8])>> {
    fn take<'a>(body: &mut &'a [u8]) -> Result<&'a [u8]> {
        let bad = || Error::fatal("truncated or malformed frames");
        let len: [u8; 8] = body.get(..8).ok_or_else(bad)?.try_into().unwrap();
        let len = usize::try_from(u64::from_le_bytes(len)).map_err(|_| bad())?;
        let rest = &body[8..];
        let part = rest.get(..len).ok_or_else(bad)?;
        *body = &rest[len..];
        Ok(part)
    }
    let mut out = Vec::new();
    while !body.is_empty() {
        let name = String::from_utf8_lossy(take(&mut body)?).into_owned();
        let data = take(&mut body)?;
        out.push((name, data));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_cuts_are_refused() {
        let body = encode([("a.bc", &b"BC\xc0\xde1"[..]), ("b.bc", b"")].into_iter());
        let back = decode(&body).unwrap();
        assert_eq!(back[0], ("a.bc".to_string(), &b"BC\xc0\xde1"[..]));
        assert_eq!(back[1], ("b.bc".to_string(), &b""[..]));
        for cut in 1..body.len() {
            if decode(&body[..cut]).is_ok() {
                // only cuts at a module boundary parse
                assert_eq!(cut, 8 + 4 + 8 + 5, "cut at {cut}");
            }
        }
        let mut huge = body.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge).is_err());
    }
}
