//! A timestamp held to the host's clock (WASI's in the Wasm filter): `lt_now`, `gt_now`,
//! `within`.

use serde_json::{Map, Value};

use super::family::Family;
use super::standard::{SchemaFor, StandardRule};
use super::subject::{nanos, Subject};

#[derive(Debug, Clone)]
pub enum Now {
    /// `lt_now`.
    Past,
    /// `gt_now`.
    Future,
    /// `within`: at most this many nanoseconds from now either way, and as written.
    Within { span: i128, shown: String },
}

impl StandardRule for Now {
    fn name(&self, family: Family) -> String {
        match self {
            Now::Past => format!("{family}.lt_now"),
            Now::Future => format!("{family}.gt_now"),
            Now::Within { shown, .. } => format!("{family}.within = \"{shown}\""),
        }
    }

    fn words(&self) -> String {
        match self {
            Now::Past => "must be in the past".to_owned(),
            Now::Future => "must be in the future".to_owned(),
            Now::Within { shown, .. } => format!("must be within {shown} of now"),
        }
    }

    fn holds(&self, subject: &Subject<'_>) -> bool {
        let Subject::Nanos(at) = subject else {
            return true;
        };
        let now = now_nanos();
        match self {
            Now::Past => *at < now,
            Now::Future => *at > now,
            Now::Within { span, .. } => (now - at).abs() <= *span,
        }
    }

    /// Now moves: a schema cannot say it.
    fn keyword(&self, _schema: SchemaFor<'_>, _base: &mut Map<String, Value>, _extra: &mut Map<String, Value>) -> bool {
        false
    }
}

/// Now, in nanoseconds since the Unix epoch. A clock set before 1970 reads as the epoch, and
/// one past the year 292 billion as its end: rules compare with whatever the host says now.
fn now_nanos() -> i128 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    nanos(
        i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        // Below a billion: it fits.
        i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0),
    )
}
