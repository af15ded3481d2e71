//! Mutual authentication of an HA connection with a shared secret (`haAuthSecret`; rmqha).
//!
//! RocketMQ's HA port takes any client: one that connects and acks offsets the master has
//! releases SYNC_MASTER puts as if a slave held them. With a secret set on both sides, each
//! connection starts with a challenge and response before the classic protocol (spec 6.1):
//!
//! ```text
//! slave  -> master  "RMQHAUT1" + 32-byte slave nonce
//! master -> slave   "RMQHAUT1" + 32-byte master nonce
//! slave  -> master  HMAC-SHA256(secret, "slave" + nonces)
//! master -> slave   HMAC-SHA256(secret, "master" + nonces)   (only if the slave's was right)
//! ```
//!
//! then the slave's first report and the stream as usual. Each side proves it knows the
//! secret over a nonce the other chose, so an answer recorded from one connection is worth
//! nothing on the next, and the secret never crosses the wire. The slave proves itself
//! first: anyone can connect to the master's port, and a master that answered every hello
//! with a proof would hand each of them a value to test guessed secrets against offline.
//! A client without the secret gets a random nonce and nothing else. The slave checks the
//! master's proof before it reports or takes a byte.
//!
//! What it does not do: encrypt or sign the stream after the handshake. Someone who can
//! already read and rewrite the traffic between the two hosts, or who poses as the master
//! at the address a slave connects to, is not kept out (and could test guesses against the
//! slave's proof): use a private network or a tunnel (WireGuard, IPsec), and a random secret
//! (`openssl rand -base64 32`), not a phrase.
//!
//! A stock RocketMQ slave cannot authenticate, so a master with a secret serves only rmqha
//! slaves that share it.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::config::Secret;

/// The first 8 bytes of each side's hello. Read as a slave's first report by a master without
/// a secret, it is an offset of about 5.9 EB, which that master recognises.
pub const MAGIC: [u8; 8] = *b"RMQHAUT1";
const NONCE_LEN: usize = 32;
const MAC_LEN: usize = 32;
const HELLO_LEN: usize = MAGIC.len() + NONCE_LEN;

/// The magic as a slave's first report reads it.
pub fn magic_as_report() -> i64 {
    i64::from_be_bytes(MAGIC)
}

fn mac(secret: &Secret, role: &[u8], slave_nonce: &[u8], master_nonce: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    m.update(b"rmqha-ha-auth-v1 ");
    m.update(role);
    m.update(slave_nonce);
    m.update(master_nonce);
    m
}

fn nonce() -> io::Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(|e| io::Error::other(format!("no random bytes for a nonce: {e}")))?;
    Ok(n)
}

/// Reads exactly `buf.len()` bytes by `deadline` from a stream whose reads time out.
fn read_by(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            // A peer trickling bytes is held to the deadline too.
            Ok(n) if got + n < buf.len() && Instant::now() >= deadline => {
                return Err(io::ErrorKind::TimedOut.into());
            }
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if Instant::now() >= deadline {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The slave's side, run before its first report. The error says why, for the slave's
/// `last_ha_error`.
pub fn slave_handshake(stream: &mut TcpStream, secret: &Secret, deadline: Instant) -> Result<(), String> {
    let ours = nonce().map_err(|e| e.to_string())?;
    let mut hello = [0u8; HELLO_LEN];
    hello[..MAGIC.len()].copy_from_slice(&MAGIC);
    hello[MAGIC.len()..].copy_from_slice(&ours);
    stream
        .write_all(&hello)
        .map_err(|e| format!("authentication (haAuthSecret): sending the hello failed: {e}"))?;
    let mut challenge = [0u8; HELLO_LEN];
    if let Err(e) = read_by(stream, &mut challenge, deadline) {
        return Err(match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                "authentication (haAuthSecret): the master closed the connection instead of answering the hello; \
                 it most likely has no haAuthSecret (its refused slaves say so)"
                    .into()
            }
            io::ErrorKind::TimedOut => "authentication (haAuthSecret): the master did not answer the hello in time; it \
                                        most likely has no haAuthSecret, or is not an rmqha master"
                .into(),
            _ => format!("authentication (haAuthSecret): reading the master's answer failed: {e}"),
        });
    }
    let (magic, theirs) = challenge.split_at(MAGIC.len());
    if magic != MAGIC {
        return Err(
            "authentication (haAuthSecret): the master answered the hello with something else; it is not \
                    an rmqha master with haAuthSecret set"
                .into(),
        );
    }
    let answer = mac(secret, b"slave", &ours, theirs).finalize().into_bytes();
    stream
        .write_all(&answer)
        .map_err(|e| format!("authentication (haAuthSecret): sending this slave's proof failed: {e}"))?;
    let mut proof = [0u8; MAC_LEN];
    if let Err(e) = read_by(stream, &mut proof, deadline) {
        return Err(match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                "authentication (haAuthSecret): the master refused this slave's proof: the two haAuthSecret values \
                 differ (its refused slaves say so)"
                    .into()
            }
            _ => format!("authentication (haAuthSecret): reading the master's proof failed: {e}"),
        });
    }
    mac(secret, b"master", &ours, theirs).verify_slice(&proof).map_err(|_| {
        "authentication (haAuthSecret): the master's proof does not match this slave's secret: it is not the \
         master it claims to be (it accepted a proof it cannot have checked)"
            .to_string()
    })
}

/// The master's side, run before it reads the slave's first report. The error is the reason
/// the slave is refused. Nothing the secret decides is sent before the slave has proven it
/// knows the secret.
pub fn master_handshake(stream: &mut TcpStream, secret: &Secret, deadline: Instant) -> Result<(), String> {
    let mut hello = [0u8; HELLO_LEN];
    // The magic first: a slave without the secret sends its 8-byte report and then waits.
    let (magic, theirs) = hello.split_at_mut(MAGIC.len());
    read_by(stream, magic, deadline).map_err(|e| early_end(e, "sent nothing"))?;
    if magic != MAGIC {
        return Err(
            "it did not authenticate: this master has haAuthSecret set, and the slave must have the same \
                    secret (a stock RocketMQ slave cannot authenticate)"
                .into(),
        );
    }
    read_by(stream, theirs, deadline).map_err(|e| early_end(e, "sent part of its hello"))?;
    let ours = nonce().map_err(|e| e.to_string())?;
    let mut challenge = [0u8; HELLO_LEN];
    challenge[..MAGIC.len()].copy_from_slice(&MAGIC);
    challenge[MAGIC.len()..].copy_from_slice(&ours);
    stream.write_all(&challenge).map_err(|e| format!("sending this master's nonce failed: {e}"))?;
    let mut proof = [0u8; MAC_LEN];
    read_by(stream, &mut proof, deadline).map_err(|e| early_end(e, "sent no proof"))?;
    mac(secret, b"slave", theirs, &ours).verify_slice(&proof).map_err(|_| {
        "its proof does not match this master's haAuthSecret: the two secrets differ".to_string()
    })?;
    let answer = mac(secret, b"master", theirs, &ours).finalize().into_bytes();
    stream.write_all(&answer).map_err(|e| format!("sending this master's proof failed: {e}"))
}

fn early_end(e: io::Error, what: &str) -> String {
    match e.kind() {
        io::ErrorKind::TimedOut => {
            format!("authentication (haAuthSecret): the peer {what} within the time allowed")
        }
        io::ErrorKind::UnexpectedEof => format!("authentication (haAuthSecret): the peer {what} and closed"),
        _ => format!("authentication (haAuthSecret): the peer {what}, then: {e}"),
    }
}
