//! Pointer and string arguments in, fixed-size text out: the checks every export shares.

use std::ffi::{CStr, CString, c_char};

use crate::status::{Failure, FfiResult, rmqha_status};

fn null(name: &str) -> Failure {
    Failure::new(rmqha_status::NullArgument, format!("{name} is NULL"))
}

/// A handle argument.
///
/// # Safety
/// `p` is NULL or points to a live `T` for `'a`.
pub unsafe fn handle<'a, T>(p: *const T, name: &str) -> FfiResult<&'a T> {
    // SAFETY: by the caller's contract.
    unsafe { p.as_ref() }.ok_or_else(|| null(name))
}

/// Checks an out-parameter before any work is done, so a NULL one costs nothing.
pub fn out<T>(p: *mut T, name: &str) -> FfiResult<()> {
    if p.is_null() { Err(null(name)) } else { Ok(()) }
}

/// Writes an out-parameter checked with [`out`]. `write`, not assignment: the caller's memory
/// may be uninitialised.
///
/// # Safety
/// `p` is non-NULL, aligned and writable.
pub unsafe fn write<T>(p: *mut T, v: T) {
    // SAFETY: by the caller's contract.
    unsafe { p.write(v) }
}

/// A required NUL-terminated UTF-8 string.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string alive for `'a`.
pub unsafe fn str<'a>(p: *const c_char, name: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(null(name));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Failure::new(rmqha_status::InvalidArgument, format!("{name} is not valid UTF-8")))
}

/// An optional string: NULL and "" both mean none.
///
/// # Safety
/// As [`str`].
pub unsafe fn opt_str<'a>(p: *const c_char, name: &str) -> FfiResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: by the caller's contract.
    let s = unsafe { str(p, name) }?;
    Ok(if s.is_empty() { None } else { Some(s) })
}

/// A byte buffer; NULL is allowed when `len` is 0.
///
/// # Safety
/// `p` is NULL or points to `len` readable bytes alive for `'a`.
pub unsafe fn bytes<'a>(p: *const u8, len: usize, name: &str) -> FfiResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::new(
            rmqha_status::NullArgument,
            format!("{name} is NULL but its length is {len}"),
        ));
    }
    plausible_len(len, name)?;
    // SAFETY: non-NULL with `len` readable bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A buffer length no message or text can have is refused before a slice is made of it or a
/// byte copied: no record holds more than an i32 says (RocketMQ's size fields), and a length
/// beyond `isize::MAX` is no buffer at all (a negative count cast to `size_t`, as a failed
/// `read()` returns).
fn plausible_len(len: usize, name: &str) -> FfiResult<()> {
    if len > i32::MAX as usize {
        return Err(Failure::new(
            rmqha_status::InvalidArgument,
            format!(
                "{name} length {len} is larger than any message can be (a negative length cast to size_t?)"
            ),
        ));
    }
    Ok(())
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Copies `s` into the caller's `buf` of `len` bytes, NUL-terminated and truncated if needed,
/// and returns the length of the whole text (the `snprintf` convention). A NUL byte in the
/// text (a properties file can spell one `\u0000`, in a key a warning quotes, say) is written
/// as the six characters `\u0000`, so C sees all of the text and `strlen` agrees with the
/// length returned.
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes.
pub unsafe fn copy_to_buf(s: &str, buf: *mut c_char, len: usize) -> usize {
    let escaped;
    let s = if s.contains('\0') {
        escaped = s.replace('\0', "\\u0000");
        escaped.as_str()
    } else {
        s
    };
    if !buf.is_null() && len > 0 {
        let part = prefix(s, len - 1);
        // SAFETY: `part.len() + 1 <= len` bytes of `buf` are writable; the regions are distinct
        // (ours is a Rust string).
        unsafe {
            std::ptr::copy_nonoverlapping(part.as_ptr().cast::<c_char>(), buf, part.len());
            buf.add(part.len()).write(0);
        }
    }
    s.len()
}

/// [`copy_to_buf`] for an export that answers a status: `buf` NULL with `len` above 0 is a
/// NULL argument (the caller meant to pass a buffer), a `len` above 2 GiB an invalid one (a
/// negative length cast to `size_t`), and the full length goes to `*out_len` when that is not
/// NULL.
///
/// # Safety
/// `buf` is NULL or points to `len` writable bytes; `out_len` is NULL or writable.
pub unsafe fn copy_out(s: &str, buf: *mut c_char, len: usize, out_len: *mut usize) -> FfiResult<()> {
    if buf.is_null() && len > 0 {
        return Err(Failure::new(
            rmqha_status::NullArgument,
            format!("buf is NULL but len is {len} (pass len 0 to ask only for the length)"),
        ));
    }
    plausible_len(len, "buf")?;
    // SAFETY: by the caller's contract.
    let n = unsafe { copy_to_buf(s, buf, len) };
    if !out_len.is_null() {
        // SAFETY: non-NULL, and the caller's.
        unsafe { write(out_len, n) };
    }
    Ok(())
}

/// `s` as a fixed-size NUL-terminated array, truncated at a character boundary if needed.
pub fn fixed<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (dst, b) in out.iter_mut().zip(prefix(s, N.saturating_sub(1)).bytes()) {
        *dst = b as c_char;
    }
    out
}

/// `s` as a C string; a value with an interior NUL (never written by rmqha, but possible in a
/// replicated record) is cut at the NUL.
pub fn c_string(s: &str) -> CString {
    let cut = s.find('\0').map_or(s, |i| &s[..i]);
    CString::new(cut).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_truncate_on_character_boundaries() {
        let mut buf = [1 as c_char; 4];
        // "é" is two bytes: "aé" fits in 3 bytes + NUL, "aéé" is cut after "aé".
        // SAFETY: buf has 4 bytes.
        let n = unsafe { copy_to_buf("aéé", buf.as_mut_ptr(), 4) };
        assert_eq!(n, 5);
        // SAFETY: NUL-terminated by copy_to_buf.
        assert_eq!(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap(), "aé");
        let f: [c_char; 3] = fixed("aé");
        // SAFETY: `fixed` NUL-terminates.
        assert_eq!(unsafe { CStr::from_ptr(f.as_ptr()) }.to_str().unwrap(), "a");
        // SAFETY: a NULL buffer with length 0 only asks for the length.
        assert_eq!(unsafe { copy_to_buf("abc", std::ptr::null_mut(), 0) }, 3);
        assert_eq!(c_string("a\0b").as_bytes(), b"a");
        // A NUL inside the text is written as \u0000: nothing after it is hidden from C.
        let mut wide = [1 as c_char; 16];
        // SAFETY: wide has 16 bytes.
        assert_eq!(unsafe { copy_to_buf("a\0bc", wide.as_mut_ptr(), 16) }, 9);
        // SAFETY: NUL-terminated by copy_to_buf.
        assert_eq!(unsafe { CStr::from_ptr(wide.as_ptr()) }.to_bytes(), b"a\\u0000bc");
    }

    #[test]
    fn copy_out_refuses_a_null_buffer_with_a_length() {
        let mut n = 99usize;
        // SAFETY: NULL with a length is refused before anything is written; `n` is writable.
        let e = unsafe { copy_out("abc", std::ptr::null_mut(), 5, &mut n) }.unwrap_err();
        assert_eq!(e.status, rmqha_status::NullArgument);
        assert_eq!(n, 99, "nothing written on failure");
        // SAFETY: NULL with 0 asks for the length.
        unsafe { copy_out("abc", std::ptr::null_mut(), 0, &mut n) }.unwrap();
        assert_eq!(n, 3);
        let mut buf = [0 as c_char; 4];
        // SAFETY: refused before anything is written.
        let e = unsafe { copy_out("abc", buf.as_mut_ptr(), usize::MAX, &mut n) }.unwrap_err();
        assert_eq!(e.status, rmqha_status::InvalidArgument);
    }
}
