//! LZ4 block-format decoder (no frame), as fatbin members compressed with
//! `--compress-mode=speed` use it. The output length is known from the member header;
//! the decoder never writes past it and checks every length and match offset.

/// Decodes one LZ4 block into exactly `out_len` bytes.
pub fn decompress_block(src: &[u8], out_len: usize) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::with_capacity(out_len.min(src.len().saturating_mul(255)));
    let mut i = 0usize;
    loop {
        let token = *src
            .get(i)
            .ok_or_else(|| format!("block ends before a token at {i}"))?;
        i += 1;
        let mut lit = (token >> 4) as usize;
        if lit == 15 {
            lit += read_extra(src, &mut i)?;
        }
        let lit_end = i
            .checked_add(lit)
            .filter(|&e| e <= src.len())
            .ok_or_else(|| {
                format!("literal run of {lit} bytes at {i} passes the end of the block")
            })?;
        if out.len() + lit > out_len {
            return Err(format!(
                "literals at {i} exceed the declared size {out_len}"
            ));
        }
        out.extend_from_slice(&src[i..lit_end]);
        i = lit_end;
        if i == src.len() {
            break; // the last sequence has literals only
        }
        let off = src
            .get(i..i + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .ok_or_else(|| format!("match offset cut short at {i}"))?;
        i += 2;
        if off == 0 || off > out.len() {
            return Err(format!(
                "match offset {off} at {} points before the output start",
                i - 2
            ));
        }
        let mut mlen = (token & 15) as usize;
        if mlen == 15 {
            mlen += read_extra(src, &mut i)?;
        }
        mlen += 4;
        if out.len() + mlen > out_len {
            return Err(format!("match at {i} exceeds the declared size {out_len}"));
        }
        let start = out.len() - off;
        for k in 0..mlen {
            let b = out[start + k];
            out.push(b);
        }
    }
    if out.len() != out_len {
        return Err(format!(
            "block decodes to {} bytes, header says {out_len}",
            out.len()
        ));
    }
    Ok(out)
}

fn read_extra(src: &[u8], i: &mut usize) -> Result<usize, String> {
    let mut n = 0usize;
    loop {
        let b = *src
            .get(*i)
            .ok_or_else(|| format!("length continues past the end at {i}"))?;
        *i += 1;
        n = n.checked_add(b as usize).ok_or("length overflows")?;
        if b != 255 {
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_overlapping_match() {
        // "abc", a match of offset 3 and length 9, then the literal-only last sequence
        let block2 = [0x35, b'a', b'b', b'c', 3, 0, 0x10, b'!'];
        assert_eq!(decompress_block(&block2, 13).unwrap(), b"abcabcabcabc!");
    }

    #[test]
    fn rejects_bad_offsets_and_overruns() {
        // a block may not end with a match
        assert!(decompress_block(&[0x35, b'a', b'b', b'c', 3, 0], 12).is_err());
        assert!(decompress_block(&[0x35, b'a', b'b', b'c', 9, 0], 12).is_err());
        assert!(decompress_block(&[0x35, b'a', b'b', b'c', 3, 0], 5).is_err());
        assert!(decompress_block(&[0xF0, 255, 255], 10).is_err());
        assert!(decompress_block(&[], 0).is_err());
        assert!(decompress_block(&[0x30, b'a'], 3).is_err());
    }
}
