//! The gRPC port's connections, bounded: at most `[limits] max_connections` at once. Past it the
//! next is not accepted until one closes — it waits in the kernel's queue, holding none of the
//! process's files — so a flood of connections can neither exhaust the process's file limit nor
//! take the console's or the store's files with it. Each accepted connection has Nagle's
//! algorithm off (it would hold small chunks back for tens of milliseconds).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// An accepted connection, holding its place among the port's connections until it closes.
#[derive(Debug)]
pub(super) struct Counted {
    stream: TcpStream,
    _place: OwnedSemaphorePermit,
}

/// The connections of `listener`, at most `max` open at once (0: no limit).
pub(super) fn incoming(listener: TcpListener, max: usize) -> impl Stream<Item = io::Result<Counted>> {
    let places = Arc::new(Semaphore::new(if max == 0 { Semaphore::MAX_PERMITS } else { max }));
    futures::stream::unfold((listener, places), |(listener, places)| async move {
        let place = Arc::clone(&places).acquire_owned().await.ok()?;
        let accepted = listener.accept().await.map(|(stream, _)| {
            let _ = stream.set_nodelay(true);
            Counted { stream, _place: place }
        });
        Some((accepted, (listener, places)))
    })
}

impl Connected for Counted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Counted {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
