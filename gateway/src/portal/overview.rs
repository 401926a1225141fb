//! `GET /`: the pool at a glance — capacity, allocated, used, idle and
//! borrowed per dimension, GPUs by model, utilisation curves (1 h, 24 h,
//! 14 d) from the persisted history, the queue by priority, the latest events.
use super::auth::Viewer;
use super::chart::{line_chart, Series};
use super::error::PortalError;
use super::events::{events_table, latest_events};
use super::layout::{age, gb, page, raw, Nav};
use super::respond::{Live, PageAnswers, Render};
use crate::api::{tenants, usage};
use crate::routes::Query;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_actors::views::{Dim, Dims, Keyed};
use caldera_spec::Usage;
use maud::{html, Markup};

/// A curve range the overview offers: its query value and length.
const RANGES: [(&str, u64); 3] = [
    ("1h", 3_600_000),
    ("24h", 86_400_000),
    ("14d", 14 * 86_400_000),
];

/// The five dimensions: label, unit, and how to read one from a [`Dims`] or a [`Usage`].
struct Dimension {
    label: &'static str,
    id: &'static str,
    dims: fn(&Dims) -> Dim,
    usage: fn(&Usage) -> f64,
    /// MB figures are shown in GB.
    in_mb: bool,
}

const DIMENSIONS: [Dimension; 5] = [
    Dimension::of("GPUs", "gpus", |d| d.gpus, |u| u.gpus, false),
    Dimension::of(
        "GPU memory",
        "gpu-memory",
        |d| d.gpu_memory_mb,
        |u| u.gpu_memory_gb,
        true,
    ),
    Dimension::of("CPU cores", "cpu", |d| d.cpu_cores, |u| u.cpu_cores, false),
    Dimension::of("Memory", "memory", |d| d.memory_mb, |u| u.memory_gb, true),
    Dimension::of("Disk", "disk", |d| d.disk_mb, |u| u.disk_gb, true),
];

impl Dimension {
    const fn of(
        label: &'static str,
        id: &'static str,
        dims: fn(&Dims) -> Dim,
        usage: fn(&Usage) -> f64,
        in_mb: bool,
    ) -> Dimension {
        Dimension {
            label,
            id,
            dims,
            usage,
            in_mb,
        }
    }

    fn show(&self, v: f64) -> String {
        // Sums of floats can come out as -0.0: show it as 0.
        let v = if v.abs() < 1e-9 { 0.0 } else { v };
        if self.in_mb {
            gb(v)
        } else {
            format!("{v:.1}")
        }
    }
}

/// The `allocated` figures of `rows` summed (idle or borrowed allocations of every tenant).
fn summed(rows: &[Keyed<Dims>], d: &Dimension) -> f64 {
    rows.iter().map(|k| (d.dims)(&k.dims).allocated).sum()
}

/// GET /
#[utoipa::path(get, path = "/", tag = "portal", operation_id = "portal_overview",
    description = "The portal's overview: the pool per dimension, utilisation curves, the queue, the latest events.",
    params(("range" = Option<String>, Query, description = "the curves' range: 1h, 24h (default) or 14d"),
        Live),
    responses(
        PageAnswers,
    ))]
pub async fn page_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let util = usage::utilization(&st, &viewer.user()).await?;
    let pool = usage::pool_metrics(&st, &viewer.user()).await?;
    let (range, span) = RANGES
        .iter()
        .find(|(r, _)| q.get("range").is_some_and(|asked| asked == r))
        .copied()
        .unwrap_or(RANGES[1]);
    let curves = curves(&viewer, &st, span).await?;
    let events = latest_events(&viewer, &st, 10).await?;
    let live = html! {
        section #pool {
            h2 { "The pool" @if util.simulated_gpus { " " small.note { "(simulated GPUs: used is the workloads' CPU use)" } } }
            table.dims {
                thead { tr { th { "" } th { "capacity" } th { "allocated" } th { "used" } th { "idle" } th { "borrowed" } th { "allocated" } } }
                tbody {
                    @for d in &DIMENSIONS {
                        @let v = (d.dims)(&util.total);
                        tr data-dim=(d.id) {
                            th { (d.label) }
                            td { (d.show(v.capacity)) }
                            td { (d.show(v.allocated)) }
                            td { (d.show(v.used)) }
                            td { (d.show(summed(&pool.idle, d))) }
                            td { (d.show(summed(&pool.borrowed, d))) }
                            td { (bar(v.allocated, v.capacity)) }
                        }
                    }
                }
            }
        }
        section #gpu-models {
            h2 { "GPUs by model" }
            table {
                thead { tr { th { "model" } th { "GPUs" } th { "allocated" } th { "used" } th { "memory" } th { "allocated" } } }
                tbody {
                    @for m in &util.by_gpu_model {
                        tr data-gpu-model=(m.key) {
                            th { (m.key) }
                            td { (format!("{:.0}", m.dims.gpus.capacity)) }
                            td { (format!("{:.2}", m.dims.gpus.allocated)) }
                            td { (format!("{:.2}", m.dims.gpus.used)) }
                            td { (gb(m.dims.gpu_memory_mb.capacity)) }
                            td { (gb(m.dims.gpu_memory_mb.allocated)) }
                        }
                    }
                }
            }
        }
        section #queue {
            h2 { "Queue by priority" }
            @if pool.queue.is_empty() { p.note { "Nothing is waiting." } }
            table {
                tbody {
                    @for qd in &pool.queue {
                        tr data-priority=(qd.priority.label()) {
                            th { (qd.priority.label()) }
                            td { (qd.tasks) " waiting" }
                            td { "oldest for " (age(pool.now_ms.saturating_sub(qd.oldest_queued_ms))) }
                        }
                    }
                }
            }
        }
        section #recent-events {
            h2 { "Latest events" }
            (events_table(&events))
        }
    };
    let fixed = html! {
        section #curves {
            h2 { "Utilisation" }
            p.ranges {
                @for (r, _) in RANGES {
                    a id=(format!("range-{r}")) href=(format!("/?range={r}")) class=[(r == range).then_some("active")] { (r) }
                    " "
                }
            }
            (curves)
        }
    };
    Ok(render.page(
        |live| page(&viewer, Nav::Overview, "Overview", fixed, live),
        live,
    ))
}

/// A horizontal bar: `part` of `whole`.
pub fn bar(part: f64, whole: f64) -> Markup {
    let pct = if whole > 0.0 {
        (part / whole * 100.0).clamp(0.0, 100.0)
    } else {
        0.0
    };
    html! { span.bar title=(format!("{pct:.0}%")) { span.fill style=(format!("width:{pct:.1}%")) {} } }
}

/// The curves over the last `span` ms: the pool's for the operator (from
/// `GET /v1/utilization/history`), a tenant's own for a tenant (from
/// `GET /v1/tenants/{name}/usage`), one chart per dimension.
async fn curves(
    viewer: &Viewer,
    st: &web::Data<AppState>,
    span: u64,
) -> Result<Markup, PortalError> {
    let to = st.cp.now_ms();
    let from = to.saturating_sub(span);
    let mut charts = Vec::new();
    let user = viewer.user();
    match (user.operator(), viewer.tenant()) {
        (Some(op), _) => {
            let points = usage::pool_history(st, &op, from, to).await?.points;
            for d in &DIMENSIONS {
                let line = |f: fn(&caldera_actors::usage_history::PoolSample) -> &Usage| {
                    points
                        .iter()
                        .map(|p| (p.at_ms, (d.usage)(f(&p.mean))))
                        .collect::<Vec<_>>()
                };
                let series = [
                    Series {
                        label: "capacity",
                        class: "capacity",
                        points: line(|s| &s.capacity),
                    },
                    Series {
                        label: "allocated",
                        class: "allocated",
                        points: line(|s| &s.allocated),
                    },
                    Series {
                        label: "used",
                        class: "used",
                        points: line(|s| &s.used),
                    },
                    Series {
                        label: "idle",
                        class: "idle",
                        points: line(|s| &s.idle),
                    },
                    Series {
                        label: "borrowed",
                        class: "borrowed",
                        points: line(|s| &s.borrowed),
                    },
                ];
                charts.push((
                    d,
                    line_chart(&format!("chart-{}", d.id), &series, from, to, None, unit(d)),
                ));
            }
        }
        (None, Some(t)) => {
            let tenant = tenants::find(st, &user, t).await?;
            let samples = usage::tenant_history(st, &tenant, from, to).await?.samples;
            for d in &DIMENSIONS {
                let series = [
                    Series {
                        label: "allocated",
                        class: "allocated",
                        points: samples
                            .iter()
                            .map(|p| (p.at_ms, (d.usage)(&p.allocated)))
                            .collect(),
                    },
                    Series {
                        label: "used",
                        class: "used",
                        points: samples
                            .iter()
                            .map(|p| (p.at_ms, (d.usage)(&p.used)))
                            .collect(),
                    },
                ];
                charts.push((
                    d,
                    line_chart(&format!("chart-{}", d.id), &series, from, to, None, unit(d)),
                ));
            }
        }
        // A session is the operator's or a tenant's: nothing else logs in.
        (None, None) => {}
    }
    Ok(html! {
        div.charts {
            @for (d, svg) in charts {
                figure { figcaption { (d.label) } (raw(svg)) }
            }
        }
        p.legend { span.key.capacity { "capacity" } span.key.allocated { "allocated" } span.key.used { "used" } span.key.idle { "idle" } span.key.borrowed { "borrowed" } }
    })
}

fn unit(d: &Dimension) -> &'static str {
    if d.in_mb {
        "GB"
    } else {
        ""
    }
}
