//! Reading the body of a server's answer with a bound: `chat --url` and `load --target` talk to
//! a `serve` — or to whatever answers at its address — and hold what it sends in memory.

use reqwest::Response;

/// The most of one answer's body the commands read: a page of history, a session's view, a
/// turn's outcome or `/metrics` fit many times over; a server cannot make them hold more.
pub(crate) const MAX_ANSWER_BYTES: usize = 64 << 20;

/// The body of `answer`, read up to `cap` bytes; a larger one is refused, saying so.
pub(crate) async fn body_of(mut answer: Response, cap: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|e| format!("reading the server's answer: {e}"))?
    {
        if body.len() + chunk.len() > cap {
            return Err(format!(
                "the server's answer is larger than {cap} bytes; not read further"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `body` once on a loopback port, and answers its URL.
    async fn serve_once(body: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).await;
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            socket.write_all(head.as_bytes()).await.unwrap();
            let _ = socket.write_all(&body).await;
        });
        url
    }

    #[tokio::test]
    async fn a_body_within_the_cap_is_read_whole_and_a_larger_one_refused() {
        let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let answer = client
            .get(serve_once(body.clone()).await)
            .send()
            .await
            .unwrap();
        assert_eq!(body_of(answer, body.len()).await.unwrap(), body);

        let answer = client
            .get(serve_once(body.clone()).await)
            .send()
            .await
            .unwrap();
        let refused = body_of(answer, 64 * 1024).await.unwrap_err();
        assert!(refused.contains("larger than 65536 bytes"), "{refused}");
    }
}
