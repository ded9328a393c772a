//! The hashes summaries and partition keys are made of: BLAKE3 over tagged, length-
//! prefixed parts, so that no two different sequences of parts hash alike.

use std::fmt;

/// A 32-byte digest (hex in JSON and in messages).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// The digest of some bytes.
    pub fn of(data: &[u8]) -> Hash {
        Hash(*blake3::hash(data).as_bytes())
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", &self.hex()[..16])
    }
}

impl serde::Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> serde::Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hash, D::Error> {
        let s = String::deserialize(d)?;
        let mut out = [0u8; 32];
        if s.len() != 64 {
            return Err(serde::de::Error::custom("a hash is 64 hex digits"));
        }
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(serde::de::Error::custom)?;
        }
        Ok(Hash(out))
    }
}

/// A hash under construction: each part carries a tag byte and, for variable-length
/// parts, its length.
#[derive(Clone)]
pub struct Hasher(blake3::Hasher);

impl Hasher {
    /// A hasher for `what` (a name that keeps hashes of different things apart).
    pub fn new(what: &str) -> Hasher {
        let mut h = Hasher(blake3::Hasher::new());
        h.str(what);
        h
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.update(b"u");
        self.0.update(&v.to_le_bytes());
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.update(b"b");
        self.0.update(&(b.len() as u64).to_le_bytes());
        self.0.update(b);
        self
    }

    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    pub fn hash(&mut self, h: &Hash) -> &mut Self {
        self.0.update(b"h");
        self.0.update(&h.0);
        self
    }

    pub fn done(&self) -> Hash {
        Hash(*self.0.finalize().as_bytes())
    }
}
