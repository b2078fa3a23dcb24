//! A real HTTP/1.1 server on loopback serving pages scripted per test: changing bodies,
//! redirects, slow and huge answers, any status and content type. Every request path is logged.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Send this many body bytes (a body larger than `Content-Length` claims, or one without
    /// a length): `None` sends `body` with its length.
    pub stream_bytes: Option<u64>,
    /// Announce `body`'s whole length, send this many bytes of it, and hang up (a cut download).
    pub cut_after: Option<usize>,
}

/// A request as a handler that needs more than its path sees it.
pub struct Request {
    /// With its query.
    pub path: String,
    /// Header names in lower case.
    pub headers: std::collections::HashMap<String, String>,
}

impl Reply {
    pub fn html(body: &str) -> Reply {
        Reply::typed(200, "text/html; charset=utf-8", body.as_bytes())
    }

    pub fn typed(status: u16, content_type: &str, body: &[u8]) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.to_vec(),
            delay: Duration::ZERO,
            stream_bytes: None,
            cut_after: None,
        }
    }

    pub fn redirect(to: &str) -> Reply {
        Reply {
            status: 302,
            headers: vec![("Location".into(), to.into())],
            body: Vec::new(),
            delay: Duration::ZERO,
            stream_bytes: None,
            cut_after: None,
        }
    }
}

pub type Handler = Box<dyn FnMut(&str) -> Reply + Send>;
pub type RequestHandler = Box<dyn FnMut(&Request) -> Reply + Send>;

/// A running site. It serves until the test process ends.
pub struct Site {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl Site {
    /// Starts a site whose answer to each request path (with its query) is `handler(path)`.
    pub fn start(mut handler: Handler) -> Site {
        Site::start_with_requests(Box::new(move |r: &Request| handler(&r.path)))
    }

    /// [`Site::start`] for a handler that reads the request's headers too (ranges, tokens).
    pub fn start_with_requests(handler: RequestHandler) -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let handler = Arc::new(Mutex::new(handler));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let log = log.clone();
                let handler = handler.clone();
                std::thread::spawn(move || serve(stream, &log, &handler));
            }
        });
        Site { base, requests }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn hits(&self, path: &str) -> usize {
        self.requests.lock().unwrap().iter().filter(|p| *p == path).count()
    }
}

fn serve(mut stream: std::net::TcpStream, log: &Mutex<Vec<String>>, handler: &Mutex<RequestHandler>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let path = first.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut line = String::new();
    let mut headers = std::collections::HashMap::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    log.lock().unwrap().push(path.clone());
    let reply = (handler.lock().unwrap())(&Request { path, headers });
    std::thread::sleep(reply.delay);
    let mut head = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match reply.stream_bytes {
        None => head.push_str(&format!("Content-Length: {}\r\n\r\n", reply.body.len())),
        Some(_) => head.push_str("\r\n"),
    }
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    match reply.stream_bytes {
        None => {
            let _ = stream.write_all(&reply.body[..reply.cut_after.unwrap_or(reply.body.len()).min(reply.body.len())]);
            if reply.cut_after.is_some() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
        Some(n) => {
            let chunk = vec![b'a'; 64 * 1024];
            let mut sent = 0u64;
            while sent < n {
                let k = chunk.len().min((n - sent) as usize);
                if stream.write_all(&chunk[..k]).is_err() {
                    return;
                }
                sent += k as u64;
            }
        }
    }
}
