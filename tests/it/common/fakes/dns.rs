//! A fake authoritative DNS server for the zone `genied.test.` on 127.0.0.1, UDP and TCP on
//! one port (hickory asks over both). Messages are read and written with hickory-proto. Every
//! query is checked to be a well-formed standard query (one question, class IN, type A or
//! AAAA, recursion desired, no answers) for a name under `genied.test.`; what arrived is
//! recorded, and anything else is recorded as a problem for the test to assert on. Names of
//! the zone without records answer NXDOMAIN; a name with records of the other family answers
//! NOERROR with no answers (NODATA), as a real server would.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, SOA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

pub const ZONE: &str = "genied.test.";

/// One record of the zone.
#[derive(Debug, Clone)]
pub enum Rec {
    Ip(&'static str),
    Addr(IpAddr),
    Cname(&'static str),
}

/// A name with so many A records that the answer does not fit a 512-byte UDP message; the
/// last one is private. Over UDP the fake answers truncated (as a real server does), so the
/// resolver must ask again over TCP to see the whole answer, and the guard must still find
/// the one bad address.
pub const MANY: (&str, &str) = ("many", "10.9.9.9");

/// Names (relative to the zone) that resolve into forbidden ranges, with the address the
/// guard must name when it refuses them.
pub const FORBIDDEN: &[(&str, &[Rec], &str)] = &[
    ("loop", &[Rec::Ip("127.0.0.1")], "127.0.0.1"),
    ("loop2", &[Rec::Ip("127.45.6.7")], "127.45.6.7"),
    ("internal", &[Rec::Ip("10.1.2.3")], "10.1.2.3"),
    ("rfc1918-b", &[Rec::Ip("172.16.9.9")], "172.16.9.9"),
    ("rfc1918-c", &[Rec::Ip("192.168.1.1")], "192.168.1.1"),
    ("meta", &[Rec::Ip("169.254.169.254")], "169.254.169.254"),
    (
        "alibaba-meta",
        &[Rec::Ip("100.100.100.200")],
        "100.100.100.200",
    ),
    ("cgnat", &[Rec::Ip("100.64.0.1")], "100.64.0.1"),
    ("zero", &[Rec::Ip("0.0.0.0")], "0.0.0.0"),
    ("this-net", &[Rec::Ip("0.1.2.3")], "0.1.2.3"),
    ("bench", &[Rec::Ip("198.18.0.1")], "198.18.0.1"),
    ("testnet", &[Rec::Ip("192.0.2.10")], "192.0.2.10"),
    ("reserved", &[Rec::Ip("240.0.0.1")], "240.0.0.1"),
    (
        "broadcast",
        &[Rec::Ip("255.255.255.255")],
        "255.255.255.255",
    ),
    ("multicast", &[Rec::Ip("224.0.0.1")], "224.0.0.1"),
    ("v6loop", &[Rec::Ip("::1")], "::1"),
    ("v6zero", &[Rec::Ip("::")], "::"),
    ("mapped", &[Rec::Ip("::ffff:127.0.0.1")], "::ffff:127.0.0.1"),
    (
        "mapped-meta",
        &[Rec::Ip("::ffff:169.254.169.254")],
        "::ffff:169.254.169.254",
    ),
    ("compat", &[Rec::Ip("::10.0.0.1")], "::10.0.0.1"),
    (
        "nat64",
        &[Rec::Ip("64:ff9b::a9fe:a9fe")],
        "64:ff9b::a9fe:a9fe",
    ),
    ("ula", &[Rec::Ip("fd00::1")], "fd00::1"),
    ("meta6", &[Rec::Ip("fd00:ec2::254")], "fd00:ec2::254"),
    ("linklocal6", &[Rec::Ip("fe80::1")], "fe80::1"),
    ("sitelocal6", &[Rec::Ip("fec0::1")], "fec0::1"),
    ("doc6", &[Rec::Ip("2001:db8::1")], "2001:db8::1"),
    ("multicast6", &[Rec::Ip("ff02::1")], "ff02::1"),
    // One public and one private answer: one bad address is enough to refuse.
    (
        "mixed",
        &[Rec::Ip("93.184.216.34"), Rec::Ip("10.0.0.7")],
        "10.0.0.7",
    ),
    (
        "mixed6",
        &[Rec::Ip("2606:2800:220:1::1"), Rec::Ip("::1")],
        "::1",
    ),
    // An alias whose target is internal.
    (
        "alias",
        &[Rec::Cname("meta.genied.test.")],
        "169.254.169.254",
    ),
];

/// Names that resolve only to public addresses (the guard lets them through).
pub const PUBLIC: &[(&str, &[Rec])] = &[
    ("public", &[Rec::Ip("93.184.216.34")]),
    ("public6", &[Rec::Ip("2606:2800:220:1::1")]),
    // The resolver asks for AAAA only when there is no A record (hickory's default
    // `Ipv4thenIpv6`), so this AAAA is never learned and never connected to.
    ("dual", &[Rec::Ip("93.184.216.34"), Rec::Ip("::1")]),
];

/// The full name of a zone entry.
pub fn fqdn(label: &str) -> String {
    format!("{label}.genied.test")
}

/// What one query asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// Lower case, without the trailing dot.
    pub name: String,
    pub qtype: RecordType,
    pub tcp: bool,
}

#[derive(Default)]
struct Log {
    seen: Vec<Seen>,
    problems: Vec<String>,
}

pub struct FakeDns {
    pub addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    /// Names with records; everything else under the zone is NXDOMAIN.
    zone: Arc<Vec<(String, Vec<Rec>)>>,
}

impl FakeDns {
    /// The zone of `FORBIDDEN` and `PUBLIC`.
    pub async fn start() -> FakeDns {
        let many: Vec<Rec> = (1..=40u8)
            .map(|i| Rec::Addr(IpAddr::from([93, 184, 216, i])))
            .chain([Rec::Addr(MANY.1.parse().unwrap())])
            .collect();
        let zone = FORBIDDEN
            .iter()
            .map(|(l, r, _)| (fqdn(l), r.to_vec()))
            .chain(PUBLIC.iter().map(|(l, r)| (fqdn(l), r.to_vec())))
            .chain([(fqdn(MANY.0), many)])
            .collect();
        Self::start_with(zone).await
    }

    pub async fn start_with(zone: Vec<(String, Vec<Rec>)>) -> FakeDns {
        // UDP and TCP on the same port, as hickory asks both at one `ip:port`.
        let (udp, tcp) = 'bind: {
            for _ in 0..50 {
                let udp = UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
                let port = udp.local_addr().unwrap().port();
                if let Ok(tcp) = TcpListener::bind(("127.0.0.1", port)).await {
                    break 'bind (udp, tcp);
                }
            }
            panic!("no port free for both UDP and TCP");
        };
        let addr = udp.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let zone = Arc::new(zone);
        let (l, z) = (log.clone(), zone.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, from)) = udp.recv_from(&mut buf).await else {
                    return;
                };
                let Some(msg) = answer(&buf[..n], false, &z, &l) else {
                    continue;
                };
                // Without EDNS (hickory's default) a UDP answer holds at most 512 bytes
                // (RFC 1035 4.2.1); a longer one goes out truncated, with TC set.
                let Ok(mut out) = msg.to_vec() else { continue };
                if out.len() > 512 {
                    let Ok(t) = msg.truncate().to_vec() else {
                        continue;
                    };
                    out = t;
                }
                let _ = udp.send_to(&out, from).await;
            }
        });
        let (l, z) = (log.clone(), zone.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = tcp.accept().await else {
                    return;
                };
                let (l, z) = (l.clone(), z.clone());
                tokio::spawn(async move {
                    // RFC 1035 4.2.2: each message is preceded by its two-byte length.
                    loop {
                        let Ok(len) = s.read_u16().await else { return };
                        let mut msg = vec![0u8; len as usize];
                        if s.read_exact(&mut msg).await.is_err() {
                            return;
                        }
                        let Some(Ok(out)) = answer(&msg, true, &z, &l).map(|m| m.to_vec()) else {
                            return;
                        };
                        let mut framed = (out.len() as u16).to_be_bytes().to_vec();
                        framed.extend_from_slice(&out);
                        if s.write_all(&framed).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakeDns { addr, log, zone }
    }

    /// Every query received, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().seen.clone()
    }

    /// True when `name` was asked for (any type, any transport).
    pub fn asked(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.log.lock().unwrap().seen.iter().any(|s| s.name == name)
    }

    /// Malformed or unexpected queries (must stay empty).
    pub fn problems(&self) -> Vec<String> {
        self.log.lock().unwrap().problems.clone()
    }

    pub fn names(&self) -> Vec<String> {
        self.zone.iter().map(|(n, _)| n.clone()).collect()
    }
}

fn zone_name() -> Name {
    Name::from_ascii(ZONE).unwrap()
}

/// Checks one request and builds the answer; `None` when it is not a DNS message at all.
fn answer(
    bytes: &[u8],
    tcp: bool,
    zone: &[(String, Vec<Rec>)],
    log: &Mutex<Log>,
) -> Option<Message> {
    let problem = |m: String| log.lock().unwrap().problems.push(m);
    let req = match Message::from_vec(bytes) {
        Ok(m) => m,
        Err(e) => {
            problem(format!("undecodable message ({} bytes): {e}", bytes.len()));
            return None;
        }
    };
    let refuse = |code: ResponseCode| Some(Message::error_msg(req.id(), req.op_code(), code));
    if req.message_type() != MessageType::Query || req.op_code() != OpCode::Query {
        problem(format!(
            "not a standard query: {:?} {:?}",
            req.message_type(),
            req.op_code()
        ));
        return refuse(ResponseCode::NotImp);
    }
    let q = match req.queries() {
        [q] => q.clone(),
        qs => {
            problem(format!("{} questions in one query", qs.len()));
            return refuse(ResponseCode::FormErr);
        }
    };
    if !req.answers().is_empty() || !req.name_servers().is_empty() || req.truncated() {
        problem(format!(
            "query for {} carries answers or is truncated",
            q.name()
        ));
        return refuse(ResponseCode::FormErr);
    }
    if !req.recursion_desired() {
        problem(format!("query for {} without recursion desired", q.name()));
    }
    let name = q.name().to_ascii().to_ascii_lowercase();
    let bare = name.trim_end_matches('.').to_string();
    log.lock().unwrap().seen.push(Seen {
        name: bare.clone(),
        qtype: q.query_type(),
        tcp,
    });
    if q.query_class() != DNSClass::IN
        || !matches!(q.query_type(), RecordType::A | RecordType::AAAA)
    {
        problem(format!(
            "unexpected question {name} {:?} {:?}",
            q.query_class(),
            q.query_type()
        ));
        return refuse(ResponseCode::NotImp);
    }
    if !q.name().is_fqdn() || !zone_name().zone_of(q.name()) {
        problem(format!("query outside the zone: {name}"));
        return refuse(ResponseCode::Refused);
    }

    let mut resp = Message::new();
    resp.set_id(req.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_authoritative(true)
        .set_recursion_desired(req.recursion_desired())
        .set_recursion_available(false)
        .add_query(q.clone());
    let lookup = |n: &str| {
        zone.iter()
            .find(|(z, _)| z.eq_ignore_ascii_case(n))
            .map(|(_, r)| r.clone())
    };
    let mut owner = q.name().clone();
    let mut answers = Vec::new();
    let mut found = lookup(&bare);
    // Follow aliases inside the zone (bounded), putting each CNAME before its target's records.
    for _ in 0..4 {
        let Some(recs) = &found else { break };
        let alias = recs.iter().find_map(|r| match r {
            Rec::Cname(t) => Some(*t),
            Rec::Ip(_) | Rec::Addr(_) => None,
        });
        match alias {
            Some(target) => {
                let t = Name::from_ascii(target).unwrap();
                answers.push(Record::from_rdata(
                    owner.clone(),
                    60,
                    RData::CNAME(CNAME(t.clone())),
                ));
                owner = t;
                found = lookup(target.trim_end_matches('.'));
            }
            None => break,
        }
    }
    match found {
        None if answers.is_empty() => {
            resp.set_response_code(ResponseCode::NXDomain);
            resp.add_name_server(soa());
        }
        None => {}
        Some(recs) => {
            for r in recs {
                let ip = match r {
                    Rec::Ip(ip) => ip.parse::<IpAddr>().unwrap(),
                    Rec::Addr(ip) => ip,
                    Rec::Cname(_) => continue,
                };
                let rdata = match (ip, q.query_type()) {
                    (IpAddr::V4(v4), RecordType::A) => RData::A(A(v4)),
                    (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(v6)),
                    _ => continue,
                };
                answers.push(Record::from_rdata(owner.clone(), 60, rdata));
            }
        }
    }
    let has_addr = answers
        .iter()
        .any(|r| matches!(r.data(), RData::A(_) | RData::AAAA(_)));
    resp.add_answers(answers);
    if !has_addr && resp.response_code() == ResponseCode::NoError {
        // NODATA: the name exists, with no record of this type.
        resp.add_name_server(soa());
    }
    Some(resp)
}

fn soa() -> Record {
    Record::from_rdata(
        zone_name(),
        60,
        RData::SOA(SOA::new(
            Name::from_ascii("ns.genied.test.").unwrap(),
            Name::from_ascii("hostmaster.genied.test.").unwrap(),
            1,
            3600,
            600,
            86400,
            60,
        )),
    )
}
