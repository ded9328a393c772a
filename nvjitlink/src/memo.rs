//! The real library's links, through nvlinkrs' cache too: a link handed to nvJitLink
//! (an option nvlinkrs does not carry out, say `-g` or `-lineinfo`) that succeeds is kept
//! on disk with every answer its handle gives (the result, the cubin, PTX and LTO IR or
//! the codes that refused them, both logs), keyed by the options, each input's type,
//! name and content, and the real library's identity; a later process's same link is
//! answered from there. Off with `-no-cache` or `NVLINKRS_CACHE=0`, as nvlinkrs' own.

use std::ffi::CString;

use nvlinkrs::cache::{Cache, Key, pack, place, unpack};

use crate::record::{Call, What};

/// What a finished link's handle answers: `Complete`'s result, and per [`What`] (in
/// [`ALL`]'s order) the code of the size call and the bytes.
pub struct Answers {
    pub result: i32,
    pub items: Vec<(i32, Vec<u8>)>,
}

pub const ALL: [What; 5] = [
    What::Cubin,
    What::Ptx,
    What::LtoIr,
    What::ErrorLog,
    What::InfoLog,
];

impl Answers {
    pub fn get(&self, what: What) -> &(i32, Vec<u8>) {
        &self.items[ALL.iter().position(|w| *w == what).unwrap_or(0)]
    }
}

/// The cache and the key of a link, when it may be cached.
pub fn key(real: &std::path::Path, given: &[CString], calls: &[Call]) -> Option<(Cache, Key)> {
    // (-time's log has this run's times)
    if given
        .iter()
        .any(|o| o.as_bytes() == b"-no-cache" || o.as_bytes().starts_with(b"-time"))
    {
        return None;
    }
    let dir = place::choose(false, None, None).dir?;
    let cache = Cache::open(&dir, nvlinkrs::cache::DEFAULT_CAP).ok()?;
    let mut k = Key::new("nvjitlink")
        .text(&real.display().to_string())
        .text(&cache.tool_id(real).ok()?);
    for o in given {
        k = k.bytes(o.as_bytes());
    }
    for call in calls {
        k = match call {
            Call::Data { kind, data, name } => k
                .text(&kind.to_string())
                .bytes(name.as_ref().map_or(b"(null)".as_slice(), |n| n.as_bytes()))
                .bytes(&data[..data.len() - 1]),
            // (the bytes it had when added, which the real library read; not cached when
            // the file holds others by now: a replay at `Complete` read those)
            Call::File { kind, path, data } => {
                let data = data.as_ref()?;
                if crate::read_input(path).as_ref() != Some(data) {
                    return None;
                }
                k.text(&format!("{kind} file"))
                    .bytes(path.as_bytes())
                    .bytes(data)
            }
        };
    }
    Some((cache, k))
}

pub fn lookup(cache: &Cache, key: &Key) -> Option<Answers> {
    let parts = unpack(&cache.get(key)?)?;
    let code = |b: &[u8]| Some(i32::from_le_bytes(b.try_into().ok()?));
    let (result, rest) = parts.split_first()?;
    if rest.len() != 2 * ALL.len() {
        return None;
    }
    let items = rest
        .chunks(2)
        .map(|p| Some((code(&p[0])?, p[1].clone())))
        .collect::<Option<Vec<_>>>()?;
    Some(Answers {
        result: code(result)?,
        items,
    })
}

/// Stores `answers` under `key`; `cold`: what the real library took to give them.
pub fn store(cache: &Cache, key: &Key, answers: &Answers, cold: std::time::Duration) {
    let codes: Vec<[u8; 4]> = answers.items.iter().map(|(c, _)| c.to_le_bytes()).collect();
    let result = answers.result.to_le_bytes();
    let mut parts: Vec<&[u8]> = vec![&result];
    for ((_, bytes), code) in answers.items.iter().zip(&codes) {
        parts.push(code);
        parts.push(bytes);
    }
    cache.put(key, &pack(&parts), cold);
}
