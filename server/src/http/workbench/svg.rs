//! Charts drawn by the server as inline SVG in the page: no script, no
//! external asset, no `style` attribute (the page's one `<style>` element
//! colours them by class), so they render under the workbench's CSP as they
//! are. Every mark carries its numbers in a `<title>`, and the pages also
//! write the same numbers beside each chart. Every element is closed
//! explicitly (`{}`): in SVG an unclosed one would hold the next.

use maud::{Markup, html};

/// A coordinate: a tenth of a pixel is plenty.
fn px(x: f64) -> String {
    format!("{x:.1}")
}

/// An `<svg>` of `width` × `height` holding `inner`, titled.
fn drawing(class: &str, width: f64, height: f64, title: &str, inner: Markup) -> Markup {
    let (w, h) = (px(width), px(height));
    html! {
        svg class=(class) role="img" width=(w) height=(h) viewBox={ "0 0 " (w) " " (h) } {
            title { (title) }
            (inner)
        }
    }
}

const METER_W: f64 = 160.0;
const METER_H: f64 = 10.0;

/// `used` of `limit` as a filled track; without a limit, the empty track.
pub fn meter(used: u64, limit: Option<u64>, title: &str) -> Markup {
    let (share, class) = match limit {
        None => (0.0, "meter none"),
        Some(l) if used >= l => (1.0, "meter full"),
        Some(l) => (used as f64 / l as f64, "meter"),
    };
    let inner = html! {
        rect.track width=(px(METER_W)) height=(px(METER_H)) rx="2" {}
        rect.fill width=(px(share * METER_W)) height=(px(METER_H)) rx="2" {}
    };
    drawing(class, METER_W, METER_H, title, inner)
}

/// One mark of a chart: its value and what its `<title>` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    pub value: u64,
    pub title: String,
}

const COLUMN_STEP: f64 = 5.0;
const COLUMNS_H: f64 = 28.0;

/// Columns side by side (a histogram), heights scaled to the tallest.
pub fn columns(marks: &[Mark], title: &str) -> Markup {
    let top = marks.iter().map(|m| m.value).max().unwrap_or(0).max(1) as f64;
    let width = (marks.len().max(1) as f64) * COLUMN_STEP;
    // A bucket with any call shows at least a pixel.
    let height = |v: u64| if v == 0 { 0.0 } else { (v as f64 / top * COLUMNS_H).max(1.0) };
    let inner = html! {
        @for (i, m) in marks.iter().enumerate() {
            rect.col x=(px(i as f64 * COLUMN_STEP)) y=(px(COLUMNS_H - height(m.value)))
                width=(px(COLUMN_STEP - 1.0)) height=(px(height(m.value))) { title { (m.title) } }
        }
        line.axis x1="0" y1=(px(COLUMNS_H + 0.5)) x2=(px(width)) y2=(px(COLUMNS_H + 0.5)) {}
    };
    drawing("columns", width, COLUMNS_H + 1.0, title, inner)
}

const BAR_ROW: f64 = 20.0;
const BAR_LABEL_W: f64 = 190.0;
const BAR_MAX_W: f64 = 220.0;

/// Horizontal bars, each with its label before it and its value after it.
pub fn bars(rows: &[(String, u64)], title: &str) -> Markup {
    let top = rows.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1) as f64;
    let height = (rows.len().max(1) as f64) * BAR_ROW;
    let inner = html! {
        @for (i, (label, value)) in rows.iter().enumerate() {
            @let y = i as f64 * BAR_ROW;
            @let w = (*value as f64 / top * BAR_MAX_W).max(1.0);
            text.lbl x=(px(BAR_LABEL_W - 6.0)) y=(px(y + 14.0)) text-anchor="end" { (label) }
            rect.bar x=(px(BAR_LABEL_W)) y=(px(y + 3.0)) width=(px(w)) height=(px(BAR_ROW - 6.0)) {
                title { (label) ": " (value) }
            }
            text.lbl x=(px(BAR_LABEL_W + w + 5.0)) y=(px(y + 14.0)) { (value) }
        }
    };
    drawing("bars", BAR_LABEL_W + BAR_MAX_W + 60.0, height, title, inner)
}

/// A step chart of a running total over time, and the limit it runs against.
pub struct Steps<'a> {
    /// The chart's own title (what it shows, in words).
    pub title: &'a str,
    /// The time span drawn, and its two ends as the axis writes them.
    pub from: (u64, &'a str),
    pub to: (u64, &'a str),
    /// The total before the first point.
    pub start: u64,
    /// The total after each step, in time order.
    pub points: &'a [(u64, Mark)],
    /// The limit the total runs against, with its title.
    pub limit: Option<(u64, String)>,
}

const STEPS_W: f64 = 360.0;
const STEPS_H: f64 = 150.0;
const STEPS_LEFT: f64 = 48.0;
const STEPS_RIGHT: f64 = 10.0;
const STEPS_TOP: f64 = 18.0;
const STEPS_BOTTOM: f64 = 22.0;

/// The values a step chart's plot spans, bottom to top: from the total it
/// starts at to the highest it reaches, so the steps fill the plot whatever
/// the budget; the limit joins the span only when it lies within one more
/// span's height of it (else a dashed line at the top would flatten the steps
/// to the floor), and is written as a number either way.
fn steps_span(c: &Steps) -> (u64, u64, bool) {
    let last = c.points.last().map_or(c.start, |(_, m)| m.value);
    let (lo, hi) = (c.start.min(last), c.start.max(last));
    let hi = hi.max(lo + 1);
    match c.limit.as_ref().map(|(l, _)| *l) {
        Some(l) if l >= lo && l <= hi + (hi - lo) => (lo, hi.max(l), true),
        _ => (lo, hi, false),
    }
}

pub fn steps(c: &Steps) -> Markup {
    let (pw, ph) = (STEPS_W - STEPS_LEFT - STEPS_RIGHT, STEPS_H - STEPS_TOP - STEPS_BOTTOM);
    let (lo, top, limit_drawn) = steps_span(c);
    let span = c.to.0.saturating_sub(c.from.0).max(1) as f64;
    let x = |t: u64| STEPS_LEFT + (t.clamp(c.from.0, c.to.0) - c.from.0) as f64 / span * pw;
    let y = |v: u64| STEPS_TOP + ph - (v.saturating_sub(lo)) as f64 / (top - lo) as f64 * ph;
    let (bottom, right, l) = (px(STEPS_TOP + ph), px(STEPS_LEFT + pw), px(STEPS_LEFT));
    let (lx, xy) = (px(STEPS_LEFT - 4.0), px(STEPS_H - 6.0));
    // Flat until each step's time, then up to its total.
    let mut line = format!("{},{}", px(x(c.from.0)), px(y(c.start)));
    let mut level = c.start;
    for (at, m) in c.points {
        line.push_str(&format!(" {},{} {},{}", px(x(*at)), px(y(level)), px(x(*at)), px(y(m.value))));
        level = m.value;
    }
    line.push_str(&format!(" {},{}", px(x(c.to.0)), px(y(level))));
    let inner = html! {
        line.axis x1=(l) y1=(px(STEPS_TOP)) x2=(l) y2=(bottom) {}
        line.axis x1=(l) y1=(bottom) x2=(right) y2=(bottom) {}
        text.lbl x=(lx) y=(bottom) text-anchor="end" { (lo) }
        text.lbl x=(lx) y=(px(STEPS_TOP + 8.0)) text-anchor="end" { (top) }
        text.lbl x=(l) y=(xy) { (c.from.1) }
        text.lbl x=(right) y=(xy) text-anchor="end" { (c.to.1) }
        @if let Some((limit, title)) = &c.limit {
            @if limit_drawn {
                line.limit x1=(l) y1=(px(y(*limit))) x2=(right) y2=(px(y(*limit))) { title { (title) } }
            }
            // The budget as a number, in the corner above the plot.
            text.lbl.budget x=(right) y="11" text-anchor="end" { "budget " (limit) title { (title) } }
        }
        polyline.line points=(line) {}
        // The total at the end, written where the line ends.
        text.lbl.end x=(px(x(c.to.0))) y=(px((y(level) - 4.0).max(STEPS_TOP + 8.0))) text-anchor="end" { (level) }
        @for (at, m) in c.points {
            circle.dot cx=(px(x(*at))) cy=(px(y(m.value))) r="3" { title { (m.title) } }
        }
    };
    drawing("steps", STEPS_W, STEPS_H, c.title, inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVIL: &str = "<script>alert('x')</script>\"&";
    const EVIL_ESCAPED: &str = "&lt;script&gt;alert('x')&lt;/script&gt;&quot;&amp;";

    /// The texts of every `<title>` of a drawing, in order.
    fn titles(svg: &str) -> Vec<&str> {
        svg.split("<title>").skip(1).map(|t| &t[..t.find("</title>").unwrap()]).collect()
    }

    fn well_formed(svg: &str) {
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"), "{svg}");
        assert!(!svg.contains("<script") && !svg.contains("style=") && !svg.contains("href"), "{svg}");
        assert_eq!(svg.matches("<title>").count(), svg.matches("</title>").count());
    }

    #[test]
    fn a_meter_fills_its_share_and_says_its_numbers() {
        let m = meter(3, Some(12), "Workspace.Write/worktree: 3 of 12 spent").into_string();
        well_formed(&m);
        assert_eq!(titles(&m), ["Workspace.Write/worktree: 3 of 12 spent"]);
        assert!(m.contains("class=\"fill\" width=\"40.0\""), "{m}");
        assert!(meter(12, Some(12), "t").into_string().starts_with("<svg class=\"meter full\""));
        assert!(
            meter(99, Some(12), "t").into_string().contains("class=\"fill\" width=\"160.0\""),
            "over the limit stays inside"
        );
        let none = meter(5, None, "no live grant").into_string();
        assert!(none.starts_with("<svg class=\"meter none\"") && none.contains("class=\"fill\" width=\"0.0\""));
        assert!(meter(0, Some(0), "t").into_string().starts_with("<svg class=\"meter full\""));
    }

    #[test]
    fn columns_scale_to_the_tallest_and_title_each_bucket() {
        let marks: Vec<Mark> = [4, 0, 1, 2].iter().map(|v| Mark { value: *v, title: format!("{v} calls") }).collect();
        let c = columns(&marks, "calls over time").into_string();
        well_formed(&c);
        assert_eq!(titles(&c), ["calls over time", "4 calls", "0 calls", "1 calls", "2 calls"]);
        assert!(c.contains("height=\"28.0\"><title>4 calls"), "{c}");
        assert!(c.contains("height=\"0.0\"><title>0 calls"), "{c}");
        assert!(c.contains("height=\"7.0\"><title>1 calls"), "{c}");
        well_formed(&columns(&[], "none").into_string());
    }

    #[test]
    fn bars_write_their_labels_and_values() {
        let b = bars(&[("denied:budget".into(), 3), ("denied:scope".into(), 1)], "denials by label").into_string();
        well_formed(&b);
        assert_eq!(titles(&b), ["denials by label", "denied:budget: 3", "denied:scope: 1"]);
        assert!(b.contains(">denied:budget</text>") && b.contains(">3</text>") && b.contains(">1</text>"), "{b}");
        assert!(b.contains("width=\"220.0\""), "the largest bar is full width: {b}");
    }

    #[test]
    fn a_step_chart_spans_what_was_spent_and_writes_a_far_budget_as_a_number() {
        let points = [
            (110, Mark { value: 3, title: "#4: 3 spent".into() }),
            (150, Mark { value: 5, title: "#9: 5 spent".into() }),
        ];
        let chart = |limit: u64| {
            steps(&Steps {
                title: "spend",
                from: (100, "t0"),
                to: (200, "t1"),
                start: 2,
                points: &points,
                limit: Some((limit, format!("budget {limit}"))),
            })
            .into_string()
        };
        let s = chart(1000);
        well_formed(&s);
        assert_eq!(titles(&s), ["spend", "budget 1000", "#4: 3 spent", "#9: 5 spent"]);
        // From 2 at the floor (y 128) to 5 at the top (y 18); x: 48 + (t-100)/100*302.
        assert!(s.contains("points=\"48.0,128.0 78.2,128.0 78.2,91.3 199.0,91.3 199.0,18.0 350.0,18.0\""), "{s}");
        assert!(!s.contains("class=\"limit\""), "a budget far above is not drawn: {s}");
        assert!(s.contains(">budget 1000<title>"), "it is written: {s}");
        assert!(s.contains(">2</text>") && s.contains(">5</text>") && s.contains(">t0</text>"), "{s}");
        // A budget near the spend is drawn, and the plot reaches up to it.
        let near = chart(6);
        assert!(
            near.contains("class=\"limit\" x1=\"48.0\" y1=\"18.0\" x2=\"350.0\" y2=\"18.0\"><title>budget 6"),
            "{near}"
        );
        assert!(near.contains("199.0,45.5 350.0,45.5"), "{near}");
        // One instant, nothing spent, no limit: still a drawing.
        let flat = steps(&Steps { title: "x", from: (5, "a"), to: (5, "a"), start: 0, points: &[], limit: None })
            .into_string();
        well_formed(&flat);
        assert!(flat.contains("points=\"48.0,128.0 48.0,128.0\""), "{flat}");
    }

    #[test]
    fn hostile_labels_are_text() {
        let mark = Mark { value: 1, title: EVIL.into() };
        let drawings = [
            meter(1, Some(2), EVIL),
            columns(std::slice::from_ref(&mark), EVIL),
            bars(&[(EVIL.into(), 2)], EVIL),
            steps(&Steps {
                title: EVIL,
                from: (0, EVIL),
                to: (9, EVIL),
                start: 0,
                points: &[(4, mark.clone())],
                limit: Some((3, EVIL.into())),
            }),
        ];
        for d in drawings.map(Markup::into_string) {
            well_formed(&d);
            assert!(d.contains(EVIL_ESCAPED), "{d}");
        }
    }
}
