//! Windows sent ahead. A processor that answers windows far away (a remote stream guard) can
//! send a closed window on its way at once ([`Processor::send_output_window`]) instead of being
//! awaited: the run reads on and fills the next window while this one is answered, and hands the
//! answer back, in order, through [`OutputWindowArgs::answered`](super::OutputWindowArgs).
//!
//! [`Processor::send_output_window`]: super::Processor::send_output_window

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::BoxFuture;

/// A window's answer on its way. Dropping it abandons the window (a remote instance is told to
/// cancel the call).
pub struct WindowInFlight {
    answer: BoxFuture<'static, std::thread::Result<WindowAnswered>>,
}

impl WindowInFlight {
    /// The window whose answer `answer` brings; a panic in it is caught and handed on.
    pub fn new(answer: impl Future<Output = WindowAnswered> + Send + 'static) -> WindowInFlight {
        WindowInFlight { answer: AssertUnwindSafe(answer).catch_unwind().boxed() }
    }
}

impl Future for WindowInFlight {
    type Output = std::thread::Result<WindowAnswered>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.answer.as_mut().poll(cx)
    }
}

impl fmt::Debug for WindowInFlight {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("WindowInFlight")
    }
}

/// What came back for a window sent ahead: opaque to the runtime, read only by the processor
/// that sent it.
pub struct WindowAnswered(Box<dyn Any + Send>);

impl WindowAnswered {
    /// An answer holding `answer`.
    pub fn new<T: Any + Send>(answer: T) -> WindowAnswered {
        WindowAnswered(Box::new(answer))
    }

    /// The answer, if it is a `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        self.0.downcast::<T>().ok().map(|answer| *answer)
    }
}

impl fmt::Debug for WindowAnswered {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("WindowAnswered")
    }
}
