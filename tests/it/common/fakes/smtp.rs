//! A fake SMTP server (plain text, no auth): speaks just enough of RFC 5321 for a client to
//! deliver, checks the command order, and records each accepted message.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[derive(Debug, Clone, Default)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// Headers and body as received (dot-unstuffed).
    pub data: String,
}

#[derive(Clone)]
pub struct FakeSmtp {
    /// What to pass as `--smtp-url`.
    pub url: String,
    mails: Arc<Mutex<Vec<Mail>>>,
}

impl FakeSmtp {
    pub async fn start() -> FakeSmtp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fake = FakeSmtp {
            url: format!("smtp://{addr}"),
            mails: Arc::default(),
        };
        let mails = fake.mails.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let mails = mails.clone();
                tokio::spawn(async move {
                    let _ = session(sock, mails).await;
                });
            }
        });
        fake
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }
}

fn addr_of(line: &str) -> String {
    line.split_once('<')
        .and_then(|(_, r)| r.split_once('>'))
        .map(|(a, _)| a.to_string())
        .unwrap_or_default()
}

async fn session(sock: tokio::net::TcpStream, mails: Arc<Mutex<Vec<Mail>>>) -> std::io::Result<()> {
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"220 fake.test ESMTP\r\n").await?;
    let mut cur = Mail::default();
    let mut greeted = false;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let cmd = line.trim_end().to_string();
        let upper = cmd.to_ascii_uppercase();
        if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            greeted = true;
            w.write_all(b"250-fake.test\r\n250 8BITMIME\r\n").await?;
        } else if upper.starts_with("MAIL FROM:") && greeted {
            cur = Mail {
                from: addr_of(&cmd),
                ..Mail::default()
            };
            w.write_all(b"250 OK\r\n").await?;
        } else if upper.starts_with("RCPT TO:") && !cur.from.is_empty() {
            cur.to.push(addr_of(&cmd));
            w.write_all(b"250 OK\r\n").await?;
        } else if upper == "DATA" && !cur.to.is_empty() {
            w.write_all(b"354 go ahead\r\n").await?;
            let mut data = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line).await? == 0 {
                    return Ok(());
                }
                if line == ".\r\n" {
                    break;
                }
                data.push_str(line.strip_prefix('.').unwrap_or(&line));
            }
            cur.data = data;
            mails.lock().unwrap().push(std::mem::take(&mut cur));
            w.write_all(b"250 queued\r\n").await?;
        } else if upper == "QUIT" {
            w.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else if upper == "RSET" || upper == "NOOP" {
            w.write_all(b"250 OK\r\n").await?;
        } else {
            w.write_all(b"503 bad sequence of commands\r\n").await?;
        }
    }
}
