//! Typed handles: what one actor holds of another. A handle names the messages
//! its actor answers, not the actor's type, so a shell depends on the protocol
//! and never on another shell (no import circle), and a test can stand in any
//! actor that answers the same messages.
//!
//! Each handle is one `Arc<dyn Port>`: cloning it is one atomic increment, and
//! the directory's 100,000 task handles cost one small allocation each.
use std::future::Future;
use std::pin::Pin;

/// The answer to an `ask`: the receiver's reply, or the mailbox error when it
/// is gone (stopped, or being rebuilt by its supervisor).
pub type Reply<T> = Pin<Box<dyn Future<Output = Result<T, actix::MailboxError>> + Send>>;

/// A fire-and-forget message that a port of type `P` accepts.
pub trait Tell<P: ?Sized> {
    fn tell(self, port: &P);
}

/// A request-reply message that a port of type `P` answers.
pub trait Ask<P: ?Sized>: actix::Message + Sized {
    fn ask(self, port: &P) -> Reply<Self::Result>;
}

/// Declares a port trait (one method per message), its blanket implementation
/// for the address of any actor that handles all of them, the cloneable handle,
/// and the `Tell`/`Ask` glue that keeps call sites as `h.do_send(M)` and
/// `h.send(M).await`, exactly as with an `Addr`.
macro_rules! handle {
    (
        $(#[$doc:meta])*
        $handle:ident: $port:ident {
            tell { $($tname:ident: $tmsg:ty),* $(,)? }
            ask { $($aname:ident: $amsg:ty),* $(,)? }
        }
    ) => {
        #[doc = concat!("The messages behind [`", stringify!($handle), "`], one method each.")]
        pub trait $port: Send + Sync {
            $(fn $tname(&self, m: $tmsg);)*
            $(fn $aname(&self, m: $amsg) -> $crate::protocol::Reply<<$amsg as actix::Message>::Result>;)*
        }

        impl<A> $port for actix::Addr<A>
        where
            A: actix::Actor<Context = actix::Context<A>>
                $(+ actix::Handler<$tmsg>)* $(+ actix::Handler<$amsg>)*,
        {
            $(fn $tname(&self, m: $tmsg) {
                actix::Addr::do_send(self, m)
            })*
            $(fn $aname(&self, m: $amsg) -> $crate::protocol::Reply<<$amsg as actix::Message>::Result> {
                Box::pin(actix::Addr::send(self, m))
            })*
        }

        $(#[$doc])*
        #[derive(Clone)]
        pub struct $handle(std::sync::Arc<dyn $port>);

        impl $handle {
            /// A handle on `port` (usually an actor's `Addr`).
            pub fn new(port: impl $port + 'static) -> Self {
                $handle(std::sync::Arc::new(port))
            }

            /// Sends without waiting (dropped if the mailbox is gone).
            pub fn do_send<M: $crate::protocol::Tell<dyn $port>>(&self, m: M) {
                m.tell(&*self.0)
            }

            /// Sends and waits for the answer.
            pub fn send<M: $crate::protocol::Ask<dyn $port>>(
                &self,
                m: M,
            ) -> $crate::protocol::Reply<M::Result> {
                m.ask(&*self.0)
            }
        }

        $(impl $crate::protocol::Tell<dyn $port> for $tmsg {
            fn tell(self, port: &dyn $port) {
                port.$tname(self)
            }
        })*
        $(impl $crate::protocol::Ask<dyn $port> for $amsg {
            fn ask(self, port: &dyn $port) -> $crate::protocol::Reply<<$amsg as actix::Message>::Result> {
                port.$aname(self)
            }
        })*
    };
}
pub(crate) use handle;
