//! Request bodies: the whole-body deadline of every request, and the check of a declared
//! length that lets a route refuse a body before reading any of it ([`declared_over`]).
//!
//! A request body must have arrived completely
//! within `GATEHOUSE_BODY_READ_TIMEOUT` seconds of the request head, however steadily its bytes
//! trickle in. (A timeout between bytes, restarted by each byte, lets one byte every few seconds
//! hold a connection for as long as the sender likes.) Past the deadline the body's next read
//! fails with [`BodyDeadlinePassed`]; the handler answers in its protocol's shape (RFC 6749
//! §5.2 JSON `invalid_request`, a JSON-RPC error, an HTML page) and the connection is closed.
//!
//! The deadline is one timer per request body, armed when the body is first read: a request
//! whose handler never reads the body costs nothing.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error of a body read past its deadline (found in an error's sources by
/// [`crate::error::body_stalled`]).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
pub struct BodyDeadlinePassed;

/// A request body that fails once its deadline has passed.
pub struct DeadlineBody {
    inner: Body,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl DeadlineBody {
    /// `inner`, to arrive whole within `limit` from now.
    pub fn new(inner: Body, limit: Duration) -> DeadlineBody {
        DeadlineBody {
            inner,
            deadline: Instant::now() + limit,
            sleep: None,
        }
    }
}

/// Whether the request declares (`Content-Length`) a body larger than `max` bytes: such a body
/// is refused before a byte of it is read.
pub fn declared_over(headers: &http::HeaderMap, max: usize) -> bool {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > max as u64)
}

/// Wraps the body of `request` in a [`DeadlineBody`] of `limit`.
pub fn apply(request: axum::extract::Request, limit: Duration) -> axum::extract::Request {
    request.map(|body| Body::new(DeadlineBody::new(body, limit)))
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        // Past the deadline nothing more is read, even bytes already waiting (a sender that
        // keeps a little data always buffered gets no longer than one that trickles).
        if this.sleep.as_ref().is_some_and(|sleep| sleep.is_elapsed()) {
            return Poll::Ready(Some(Err(axum::Error::new(BodyDeadlinePassed))));
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BodyDeadlinePassed)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that sends one byte every 100 ms, forever.
    struct Trickle(Pin<Box<Sleep>>);

    impl http_body::Body for Trickle {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            match self.0.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.0 = Box::pin(tokio::time::sleep(Duration::from_millis(100)));
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
                }
                Poll::Pending => Poll::Pending,
            }
        }
    }

    #[tokio::test]
    async fn a_trickling_body_fails_at_the_deadline_not_later() {
        let started = Instant::now();
        // Each byte would restart a timeout between bytes.
        let body = Body::new(Trickle(Box::pin(tokio::time::sleep(Duration::ZERO))));
        let limited = Body::new(DeadlineBody::new(body, Duration::from_millis(500)));
        let error = axum::body::to_bytes(limited, usize::MAX)
            .await
            .expect_err("the read fails");
        assert!(crate::error::body_stalled(&error), "{error}");
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(500) && elapsed < Duration::from_millis(1500),
            "{elapsed:?}"
        );
    }

    #[tokio::test]
    async fn a_body_in_time_is_read_whole() {
        let body = Body::new(DeadlineBody::new(
            Body::from("grant_type=x"),
            Duration::from_secs(5),
        ));
        let read = axum::body::to_bytes(body, usize::MAX).await.expect("read");
        assert_eq!(read, Bytes::from_static(b"grant_type=x"));
    }
}
