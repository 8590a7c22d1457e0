//! The proxy's hand-written parsers against the maintained crates of the field (the measured
//! reason they stay ours): `dns::answer` against the same decisions on `hickory-proto`'s parser
//! and builder, `tls::parse_client_hello` against `tls-parser` (records joined here, as
//! `tls-parser` does not join a handshake message over records). Prints the time per query or
//! hello of each, in paired rounds of one run, and what each does with the same malformed
//! inputs.
//! Not part of the workspace (so neither crate is built for the proxy's tests):
//! `cargo run --release --manifest-path proxy/compare/Cargo.toml`.

use std::hint::black_box;
use std::time::Instant;

use efr_proxy::dns::{self, DnsOutcome, NameTable, SYNTHETIC_BASE};
use efr_proxy::policy::{HostRule, ProxyPolicy};
use efr_proxy::tls;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType, rdata::A};

/// The same decisions as dns::answer, on hickory's parser and builder.
fn hickory_answer(t: &NameTable, q: &[u8]) -> (Option<Vec<u8>>, DnsOutcome) {
    let m = match Message::from_vec(q) {
        Ok(m) => m,
        Err(_) => {
            // hickory gives no partial header: without it no reply (id unknown).
            if q.len() < 12 || q[2] & 0x80 != 0 {
                return (None, DnsOutcome::Dropped);
            }
            let mut r = Message::new();
            r.set_id(u16::from_be_bytes([q[0], q[1]]));
            r.set_message_type(MessageType::Response);
            r.set_response_code(ResponseCode::FormErr);
            return (r.to_vec().ok(), DnsOutcome::Refused(None));
        }
    };
    if m.message_type() != MessageType::Query {
        return (None, DnsOutcome::Dropped);
    }
    let mut r = Message::new();
    r.set_id(m.id());
    r.set_message_type(MessageType::Response);
    r.set_op_code(m.op_code());
    r.set_authoritative(true);
    r.set_recursion_desired(m.recursion_desired());
    if m.op_code() != OpCode::Query {
        r.set_response_code(ResponseCode::NotImp);
        return (r.to_vec().ok(), DnsOutcome::Refused(None));
    }
    if m.queries().len() != 1 {
        r.set_response_code(ResponseCode::FormErr);
        return (r.to_vec().ok(), DnsOutcome::Refused(None));
    }
    let qq = m.queries()[0].clone();
    r.add_query(qq.clone());
    if qq.query_class() != DNSClass::IN {
        r.set_response_code(ResponseCode::Refused);
        return (r.to_vec().ok(), DnsOutcome::Refused(None));
    }
    let mut name = qq.name().to_lowercase().to_ascii();
    if name.ends_with('.') {
        name.pop();
    }
    match t.lookup(&name) {
        None => {
            r.set_response_code(ResponseCode::NXDomain);
            (
                r.to_vec().ok(),
                DnsOutcome::Refused((!name.is_empty()).then_some(name)),
            )
        }
        Some(ip) => {
            if qq.query_type() == RecordType::A {
                r.add_answer(Record::from_rdata(qq.name().clone(), 60, RData::A(A(ip))));
            }
            (r.to_vec().ok(), DnsOutcome::Allowed(name))
        }
    }
}

fn tp_sni(buf: &[u8]) -> Result<Option<String>, String> {
    use tls_parser::*;
    let mut msg = Vec::new();
    let mut rest = buf;
    loop {
        let (r, rec) = parse_tls_raw_record(rest).map_err(|e| {
            format!(
                "record: {}",
                format!("{e:?}").chars().take(60).collect::<String>()
            )
        })?;
        if rec.hdr.record_type != TlsRecordType::Handshake {
            return Err("not handshake".into());
        }
        msg.extend_from_slice(rec.data);
        rest = r;
        if msg.len() >= 4 {
            let hl = u32::from_be_bytes([0, msg[1], msg[2], msg[3]]) as usize;
            if msg.len() >= 4 + hl {
                break;
            }
        }
        if rest.is_empty() {
            return Err("incomplete".into());
        }
    }
    let (_, m) = parse_tls_message_handshake(&msg[..]).map_err(|e| {
        format!(
            "hello: {}",
            format!("{e:?}").chars().take(60).collect::<String>()
        )
    })?;
    let TlsMessage::Handshake(TlsMessageHandshake::ClientHello(ch)) = m else {
        return Err("not hello".into());
    };
    let Some(ext) = ch.ext else { return Ok(None) };
    let (_, exts) = parse_tls_client_hello_extensions(ext).map_err(|e| {
        format!(
            "ext: {}",
            format!("{e:?}").chars().take(60).collect::<String>()
        )
    })?;
    for e in exts {
        if let TlsExtension::SNI(v) = e {
            for (t, n) in v {
                if t == SNIType::HostName {
                    return Ok(Some(String::from_utf8_lossy(n).into_owned()));
                }
            }
        }
    }
    Ok(None)
}

fn time<F: FnMut()>(n: u32, mut f: F) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let mut p = ProxyPolicy::default();
    p.grants.push(HostRule::parse_cli("registry.test").unwrap());
    let t = NameTable::new(p, SYNTHETIC_BASE);
    let allowed = dns::build_query(7, "registry.test", 1);
    let refused = dns::build_query(8, "evil.example.test", 1);
    // Paired timing rounds.
    for round in 0..5 {
        for (label, q) in [("allowed A", &allowed), ("refused", &refused)] {
            let a = time(200_000, || {
                black_box(dns::answer(&t, black_box(q)));
            });
            let b = time(200_000, || {
                black_box(hickory_answer(&t, black_box(q)));
            });
            println!(
                "dns round {round} {label}: ours {a:.0} ns, hickory {b:.0} ns, ratio {:.1}",
                b / a
            );
        }
    }
    // Same answers on the valid queries?
    for q in [
        &allowed,
        &refused,
        &dns::build_query(9, "registry.test", 28),
    ] {
        let (x, ox) = dns::answer(&t, q);
        let (y, oy) = hickory_answer(&t, q);
        println!("dns same outcome {} same bytes {}", ox == oy, x == y);
        if x != y {
            println!("  ours    {:02x?}\n  hickory {:02x?}", x, y);
        }
    }
    // Malformed inputs.
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    cases.push(("short (5 bytes)", b"short".to_vec()));
    let mut v = allowed.clone();
    v[2] |= 0x80;
    cases.push(("a response", v));
    let mut v = allowed.clone();
    v.truncate(15);
    cases.push(("name cut", v));
    let mut v = allowed.clone();
    v.truncate(allowed.len() - 2);
    cases.push(("class cut", v));
    let mut v = allowed.clone();
    v[5] = 0;
    cases.push(("qdcount 0", v));
    let mut v = allowed.clone();
    v[5] = 2;
    cases.push(("qdcount 2, one question", v));
    let mut v = allowed.clone();
    v.extend_from_slice(b"junk");
    cases.push(("trailing bytes", v));
    let mut v = allowed.clone();
    v[11] = 1;
    cases.push(("arcount 1, no record", v));
    let mut v = allowed.clone();
    v[11] = 1;
    v.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
    cases.push(("EDNS OPT (dig)", v));
    let mut v = dns::build_query(1, "", 1);
    v.truncate(12);
    v.extend_from_slice(&[1, b'a', 0xc0, 12, 0, 1, 0, 1]);
    cases.push(("compression loop in question", v));
    let mut v = dns::build_query(1, "", 1);
    v.truncate(12);
    v.extend_from_slice(&[3, b'a', 0, b'b', 0, 0, 1, 0, 1]);
    cases.push(("NUL byte in a label", v));
    let mut v = dns::build_query(1, "", 1);
    v.truncate(12);
    v.extend_from_slice(&[
        3, b'a', b'.', b'b', 4, b't', b'e', b's', b't', 0, 0, 1, 0, 1,
    ]);
    cases.push(("dot inside a label", v));
    let mut v = dns::build_query(1, "", 1);
    v.truncate(12);
    v.extend_from_slice(&[0x41]);
    v.extend_from_slice(&[b'a'; 65]);
    v.extend_from_slice(&[0, 0, 1, 0, 1]);
    cases.push(("label type 0x40", v));
    let mut v = dns::build_query(1, "", 1);
    v.truncate(12);
    for _ in 0..5 {
        v.push(63);
        v.extend_from_slice(&[b'a'; 63]);
    }
    v.extend_from_slice(&[0, 0, 1, 0, 1]);
    cases.push(("name over 255", v));
    let mut v = dns::build_query(1, "", 1);
    v.truncate(12);
    for _ in 0..4 {
        v.push(63);
        v.extend_from_slice(&[0xff; 63]);
    }
    v.extend_from_slice(&[0, 0, 1, 0, 1]);
    cases.push(("non-UTF-8 labels", v));
    let mut v = allowed.clone();
    v[2] = 0x28;
    cases.push(("opcode UPDATE", v));
    let mut v = allowed.clone();
    let n = v.len();
    v[n - 1] = 3;
    cases.push(("class CHAOS", v));
    let mut v = allowed.clone();
    v[7] = 1;
    cases.push(("ancount 1, no record", v));
    for (label, q) in &cases {
        let (x, ox) = dns::answer(&t, q);
        let (y, oy) = hickory_answer(&t, q);
        let rc = |r: &Option<Vec<u8>>| {
            r.as_ref()
                .map(|r| format!("rcode {}", r.get(3).map(|b| b & 0xf).unwrap_or(99)))
                .unwrap_or("no reply".into())
        };
        let hp = match Message::from_vec(q) {
            Ok(_) => "parses".to_string(),
            Err(e) => format!("error: {e}"),
        };
        println!(
            "dns malformed | {label} | ours {:?} {} | hickory {:?} {} | hickory parse {hp}",
            ox,
            rc(&x),
            oy,
            rc(&y)
        );
    }

    // TLS.
    let small = tls::build_client_hello(Some("registry.test"));
    // A big hello: a 1216-byte key share (X25519MLKEM768) as an unknown extension after SNI.
    let big = {
        let mut h = small.clone();
        let hs_len = u32::from_be_bytes([0, h[6], h[7], h[8]]) as usize;
        let ext_off = 5 + 4 + 2 + 32 + 1 + 4 + 2;
        let mut ext = vec![0x00, 0x33];
        ext.extend_from_slice(&(1220u16).to_be_bytes());
        ext.extend_from_slice(&[0x11, 0xec, 0x04, 0xc0]);
        ext.extend_from_slice(&[9u8; 1216]);
        let el = u16::from_be_bytes([h[ext_off], h[ext_off + 1]]) as usize + ext.len();
        h[ext_off..ext_off + 2].copy_from_slice(&(el as u16).to_be_bytes());
        h.extend_from_slice(&ext);
        let nl = hs_len + ext.len();
        h[6..9].copy_from_slice(&(nl as u32).to_be_bytes()[1..]);
        let rl = nl + 4;
        h[3..5].copy_from_slice(&(rl as u16).to_be_bytes());
        h
    };
    assert_eq!(
        tls::parse_client_hello(&big).unwrap().sni.as_deref(),
        Some("registry.test")
    );
    assert_eq!(tp_sni(&big).unwrap().as_deref(), Some("registry.test"));
    let split = |h: &[u8], at: &[usize]| -> Vec<u8> {
        let hs = &h[5..];
        let mut out = Vec::new();
        let mut prev = 0;
        for &a in at.iter().chain(std::iter::once(&hs.len())) {
            out.extend_from_slice(&[22, 3, 1]);
            out.extend_from_slice(&((a - prev) as u16).to_be_bytes());
            out.extend_from_slice(&hs[prev..a]);
            prev = a;
        }
        out
    };
    let three = split(&big, &[3, 600]);
    for round in 0..5 {
        for (label, h) in [("small", &small), ("1.4 KB", &big), ("3 records", &three)] {
            let a = time(200_000, || {
                black_box(tls::parse_client_hello(black_box(h)).ok());
            });
            let b = time(200_000, || {
                black_box(tp_sni(black_box(h)).ok());
            });
            println!(
                "tls round {round} {label}: ours {a:.0} ns, tls-parser {b:.0} ns, ratio {:.1}",
                b / a
            );
        }
    }
    let mut tc: Vec<(&str, Vec<u8>)> = Vec::new();
    tc.push(("3 records, header split (3 bytes first)", three.clone()));
    tc.push(("HTTP", b"GET / HTTP/1.1\r\n\r\n".to_vec()));
    let mut v = small.clone();
    v[5] = 2;
    tc.push(("ServerHello type", v));
    let mut v = small.clone();
    v.extend_from_slice(&[22, 3, 1, 0, 1, 0]);
    tc.push(("data after the hello", v));
    let mut v = small.clone();
    v[3] = 0;
    v[4] = 0;
    tc.push(("record length 0", v));
    let mut v = small.clone();
    v[2] = 9;
    tc.push(("record version 3.9", v));
    let mut v = small.clone();
    v[9] = 4;
    tc.push(("client version 4.3", v));
    let mut v = small.clone();
    v[9 + 2 + 32] = 33;
    tc.push(("session id 33", v));
    let dup = {
        let mut h = small.clone();
        let hl = u32::from_be_bytes([0, h[6], h[7], h[8]]) as usize;
        let eo = 5 + 4 + 2 + 32 + 1 + 4 + 2;
        let e = [0u8, 0x2b, 0, 3, 2, 3, 4];
        let el = u16::from_be_bytes([h[eo], h[eo + 1]]) as usize + 7;
        h[eo..eo + 2].copy_from_slice(&(el as u16).to_be_bytes());
        h.extend_from_slice(&e);
        h[6..9].copy_from_slice(&((hl + 7) as u32).to_be_bytes()[1..]);
        let rl = hl + 11;
        h[3..5].copy_from_slice(&(rl as u16).to_be_bytes());
        h
    };
    tc.push(("duplicate extension", dup));
    tc.push((
        "SNI with a space",
        tls::build_client_hello(Some("a b.test")),
    ));
    tc.push(("SNI with a NUL", tls::build_client_hello(Some("a\0b.test"))));
    tc.push(("SNI empty", tls::build_client_hello(Some(""))));
    let mut v = small.clone();
    v[9 + 2 + 32 + 1 + 1] = 0;
    v[9 + 2 + 32 + 1 + 2] = 0;
    tc.push(("cipher suites broken length", v));
    let mut v = small.clone();
    v.truncate(v.len() - 3);
    let l = v.len() - 5;
    v[3..5].copy_from_slice(&(l as u16).to_be_bytes());
    tc.push(("extensions cut inside the record", v));
    for (label, h) in &tc {
        println!(
            "tls malformed | {label} | ours {:?} | tls-parser {:?}",
            tls::parse_client_hello(h).map(|c| c.sni),
            tp_sni(h)
        );
    }
    // Every prefix: ours says Incomplete; tls-parser?
    let mut tp_prefix = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..three.len() {
        let k = match tp_sni(&three[..i]) {
            Ok(s) => format!("Ok({s:?})"),
            Err(e) => e.split('(').next().unwrap().to_string(),
        };
        *tp_prefix.entry(k).or_default() += 1;
    }
    println!(
        "tls prefixes of the 3-record hello ({} prefixes): ours all Incomplete: {}; tls-parser {:?}",
        three.len(),
        (0..three.len())
            .all(|i| tls::parse_client_hello(&three[..i]) == Err(tls::HelloError::Incomplete)),
        tp_prefix
    );
}
