//! The rest of a native call's view, as the launcher hands it to its child while the child
//! builds the base (see [`crate::backend::native::spawn`]): a compact encoding, cheap to read in a
//! freshly cloned process (JSON through serde cost the child about 0.2 ms there).
//!
//! Records, one after the other: a tag byte, then the fields, each ended by a NUL (no path
//! holds one). Bind `B src dst w|r`; devices `D`, masks `M` (directory) and `F` (file),
//! seals `S`, each one path; `L` says
//! the line gets Landlock rules, whose lists follow as `r`, `w`, `d`, `s` paths, with `T`
//! (TCP refused) and `C` (scopes).

use crate::restrict::lockdown::LandlockSpec;
use crate::view::Op;

/// What the child applies after the base of its view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rest {
    /// The view's mount operations after its base, in order.
    pub ops: Vec<Op>,
    /// The line's Landlock rules (`None`: the line gets none).
    pub landlock: Option<LandlockSpec>,
}

fn put(out: &mut Vec<u8>, tag: u8, fields: &[&str]) {
    out.push(tag);
    for f in fields {
        out.extend_from_slice(f.as_bytes());
        out.push(0);
    }
}

/// The bytes of `rest`.
pub fn encode(rest: &Rest) -> Vec<u8> {
    let mut out = Vec::with_capacity(4096);
    for op in &rest.ops {
        match op {
            Op::Bind { src, dst, rw } => {
                put(&mut out, b'B', &[src, dst, if *rw { "w" } else { "r" }])
            }
            Op::Dev { path } => put(&mut out, b'D', &[path]),
            Op::MaskDir { path } => put(&mut out, b'M', &[path]),
            Op::MaskFile { path } => put(&mut out, b'F', &[path]),
            Op::MaskWith { path, content } => put(&mut out, b'W', &[path, content]),
            Op::SealDir { path } => put(&mut out, b'S', &[path]),
            Op::Overlay {
                path,
                upper,
                work,
                conversation,
            } => put(
                &mut out,
                b'O',
                &[path, upper, work, conversation.as_deref().unwrap_or("")],
            ),
        }
    }
    if let Some(l) = &rest.landlock {
        put(&mut out, b'L', &[]);
        for (tag, list) in [
            (b'r', &l.read),
            (b'w', &l.write),
            (b'd', &l.dev),
            (b's', &l.sockets),
            (b'h', &l.hidden),
        ] {
            for p in list {
                put(&mut out, tag, &[p]);
            }
        }
        if l.deny_tcp {
            put(&mut out, b'T', &[]);
        }
        if l.scopes {
            put(&mut out, b'C', &[]);
        }
    }
    out
}

/// What is wrong with the bytes of a [`Rest`] (the launcher and its child are one binary:
/// any of these is a bug or a torn pipe).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoffError {
    /// A field without its ending NUL: the byte where the field starts.
    #[error("view record cut short at byte {0}")]
    CutShort(usize),
    /// A field that is not UTF-8: the byte where it starts.
    #[error("view path at byte {0} not utf-8")]
    NotUtf8(usize),
    /// A bind whose mode is neither `w` nor `r`: the mode found (its first 16 characters).
    #[error("view bind mode {0:?}")]
    BindMode(String),
    /// A Landlock record (`r`, `w`, `d`, `s`, `h`, `T`, `C`) before the `L` that starts them.
    #[error("view landlock record before its start")]
    LandlockFirst,
    /// A tag byte no record has.
    #[error("view record tag {0:#x}")]
    Tag(u8),
}

/// The [`Rest`] in `b`, or what is wrong with it.
pub fn decode(b: &[u8]) -> Result<Rest, HandoffError> {
    let mut rest = Rest::default();
    let mut at = 0;
    let field = |at: &mut usize| -> Result<String, HandoffError> {
        let end = b[*at..]
            .iter()
            .position(|&c| c == 0)
            .ok_or(HandoffError::CutShort(*at))?;
        let s = std::str::from_utf8(&b[*at..*at + end]).map_err(|_| HandoffError::NotUtf8(*at))?;
        *at += end + 1;
        Ok(s.to_string())
    };
    while at < b.len() {
        let tag = b[at];
        at += 1;
        let one_path: Option<fn(String) -> Op> = match tag {
            b'D' => Some(|path| Op::Dev { path }),
            b'M' => Some(|path| Op::MaskDir { path }),
            b'F' => Some(|path| Op::MaskFile { path }),
            b'S' => Some(|path| Op::SealDir { path }),
            _ => None,
        };
        if let Some(make) = one_path {
            rest.ops.push(make(field(&mut at)?));
            continue;
        }
        match tag {
            b'B' => {
                let (src, dst) = (field(&mut at)?, field(&mut at)?);
                let rw = match field(&mut at)?.as_str() {
                    "w" => true,
                    "r" => false,
                    other => return Err(HandoffError::BindMode(other.chars().take(16).collect())),
                };
                rest.ops.push(Op::Bind { src, dst, rw });
            }
            b'W' => {
                let (path, content) = (field(&mut at)?, field(&mut at)?);
                rest.ops.push(Op::MaskWith { path, content });
            }
            b'O' => {
                let (path, upper, work) = (field(&mut at)?, field(&mut at)?, field(&mut at)?);
                let conversation = Some(field(&mut at)?).filter(|c| !c.is_empty());
                rest.ops.push(Op::Overlay {
                    path,
                    upper,
                    work,
                    conversation,
                });
            }
            b'L' => rest.landlock = Some(LandlockSpec::default()),
            b'r' | b'w' | b'd' | b's' | b'h' | b'T' | b'C' => {
                let l = rest.landlock.as_mut().ok_or(HandoffError::LandlockFirst)?;
                match tag {
                    b'r' => l.read.push(field(&mut at)?),
                    b'w' => l.write.push(field(&mut at)?),
                    b'd' => l.dev.push(field(&mut at)?),
                    b's' => l.sockets.push(field(&mut at)?),
                    b'h' => l.hidden.push(field(&mut at)?),
                    b'T' => l.deny_tcp = true,
                    _ => l.scopes = true,
                }
            }
            other => return Err(HandoffError::Tag(other)),
        }
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Rest {
        Rest {
            ops: vec![
                Op::Bind {
                    src: "/p".into(),
                    dst: "/p".into(),
                    rw: true,
                },
                Op::Bind {
                    src: "/s k".into(),
                    dst: "/s k".into(),
                    rw: false,
                },
                Op::Dev {
                    path: "/dev/kvm".into(),
                },
                Op::MaskDir {
                    path: "/h/.ssh".into(),
                },
                Op::MaskFile {
                    path: "/h/.netrc".into(),
                },
                Op::MaskWith {
                    path: "/h/.npmrc".into(),
                    content: "registry=https://r.example/\n; removed\n".into(),
                },
                Op::SealDir {
                    path: "/h/.ssh".into(),
                },
            ],
            landlock: Some(LandlockSpec {
                read: vec!["/".into()],
                write: vec!["/p".into(), "/tmp".into()],
                dev: vec!["/dev".into()],
                sockets: vec!["/run/x.sock".into()],
                hidden: vec!["/h/.aws".into(), "/h/.ssh".into()],
                deny_tcp: true,
                scopes: true,
            }),
        }
    }

    #[test]
    fn round_trip() {
        let r = sample();
        assert_eq!(decode(&encode(&r)).unwrap(), r);
        let mut none = sample();
        none.landlock = None;
        assert_eq!(decode(&encode(&none)).unwrap(), none);
        let mut off = sample();
        if let Some(l) = off.landlock.as_mut() {
            l.deny_tcp = false;
            l.scopes = false;
        }
        assert_eq!(decode(&encode(&off)).unwrap(), off);
        assert_eq!(decode(&[]).unwrap(), Rest::default());
    }

    #[test]
    fn bad_bytes_are_errors() {
        let good = encode(&sample());
        // Every cut and every single-byte change is either an error or a valid Rest; never
        // a panic.
        for n in 0..good.len() {
            let _ = decode(&good[..n]);
            for v in [0u8, b'x', 0xff, b'L', b'B'] {
                let mut b = good.clone();
                b[n] = v;
                let _ = decode(&b);
            }
        }
        assert!(decode(b"Bx\0y\0").is_err());
        assert!(decode(b"Bx\0y\0q\0").is_err());
        assert!(decode(b"w/p\0").is_err());
        assert!(decode(b"Z").is_err());
        assert!(decode(b"P\xff\0").is_err());
    }
}
