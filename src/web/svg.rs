//! A [`Drawing`] as inline SVG: each step a `<g class="node" data-step=".." data-phase="..">`
//! coloured by phase (the classes are styled by the embedded stylesheet), linking to its step
//! panel; each dependency an `<path class="edge">` from the bottom of one box to the top of the
//! next. Every user string goes through [`escape`](super::escape).
//!
//! - Edges are routed around boxes: between two layers an edge is a curve in the gap between
//!   them, and through a layer it skips it runs straight down a lane beside that layer's boxes
//!   (half a column's spare width from each), so no edge crosses a box that is not one of its
//!   ends.
//! - The exit steps are drawn inside a dashed `<g class="exit-group">` labelled `onExit`, and
//!   the edges from the last steps to them dashed (`class="edge after-all"`), as `graph` draws
//!   them.
//! - A failure the workflow tolerates (`continueOn.failed`) is marked `tolerated`, apart from a
//!   failure that fails the workflow.

use std::fmt::Write as _;

use super::escape::{Escaped, query_value};
use super::graph::{Drawing, Node};

const NODE_WIDTH: f64 = 180.0;
const NODE_HEIGHT: f64 = 44.0;
const COLUMN: f64 = 200.0;
const ROW: f64 = 84.0;
const MARGIN: f64 = 16.0;
/// Characters of a name shown in a box; the whole name is the box's tooltip.
const LABEL_CHARS: usize = 24;
/// Space between the exit group's dashed border and its boxes (room for its label above).
const GROUP_PAD: (f64, f64) = (8.0, 18.0);
/// The dashes of the exit group and of the edges into it, as `graph`'s `style=dashed`.
const DASHES: &str = "5 4";

/// Where the boxes are drawn.
struct Geometry<'a> {
    drawing: &'a Drawing,
    position: Vec<usize>,
    width: f64,
}

impl Geometry<'_> {
    /// Centre of each node's box.
    fn centre(&self, node: usize) -> (f64, f64) {
        let layout = &self.drawing.layout;
        let x =
            MARGIN + (self.width * COLUMN) / 2.0 + layout.centred(node, &self.position) * COLUMN;
        (x, self.top(layout.layer[node]) + NODE_HEIGHT / 2.0)
    }

    /// The top of the boxes of `layer`.
    fn top(&self, layer: usize) -> f64 {
        MARGIN + layer as f64 * ROW
    }

    /// An x near `wanted` where a line down through `layer` touches none of its boxes: `wanted`
    /// itself when it is clear of them, else the nearest lane between two boxes or beside the
    /// first or last (each half the spare width of a column from the boxes around it).
    fn lane(&self, layer: usize, wanted: f64) -> f64 {
        let centres: Vec<f64> = (self.drawing.layout.layers[layer].iter())
            .map(|&n| self.centre(n).0)
            .collect();
        let clear = |x: f64| {
            centres
                .iter()
                .all(|c| (x - c).abs() >= NODE_WIDTH / 2.0 + 2.0)
        };
        if clear(wanted) {
            return wanted;
        }
        let beside = centres.first().map(|c| c - COLUMN / 2.0).into_iter();
        let between = centres.windows(2).map(|pair| (pair[0] + pair[1]) / 2.0);
        let after = centres.last().map(|c| c + COLUMN / 2.0);
        (beside.chain(between).chain(after))
            .min_by(|a, b| (a - wanted).abs().total_cmp(&(b - wanted).abs()))
            .unwrap_or(wanted)
    }

    /// The path of an edge: from the bottom of `from`'s box to the top of `to`'s, a curve
    /// across each gap between layers and a straight line down a lane of each layer between.
    fn edge_path(&self, from: usize, to: usize) -> String {
        let layers = &self.drawing.layout.layer;
        let ((x1, y1), (x2, y2)) = (self.centre(from), self.centre(to));
        let (first, last) = (layers[from], layers[to]);
        let mut d = format!("M {x1} {}", y1 + NODE_HEIGHT / 2.0);
        let mut at = (x1, y1 + NODE_HEIGHT / 2.0);
        for layer in first + 1..last {
            let share = (layer - first) as f64 / (last - first) as f64;
            let x = self.lane(layer, x1 + (x2 - x1) * share);
            let top = self.top(layer);
            curve(&mut d, at, (x, top));
            let _ = write!(d, " L {x} {}", top + NODE_HEIGHT);
            at = (x, top + NODE_HEIGHT);
        }
        curve(&mut d, at, (x2, y2 - NODE_HEIGHT / 2.0));
        d
    }
}

/// A curve from `a` down to `b` leaving and arriving upright: it stays between their heights.
fn curve(d: &mut String, a: (f64, f64), b: (f64, f64)) {
    let bend = (b.1 - a.1) / 2.0;
    let _ = write!(
        d,
        " C {} {} {} {} {} {}",
        a.0,
        a.1 + bend,
        b.0,
        b.1 - bend,
        b.0,
        b.1
    );
}

/// The drawing as an `<svg>` element (with its namespace, so it also stands alone).
pub fn render(drawing: &Drawing) -> String {
    let layout = &drawing.layout;
    let geometry = Geometry {
        drawing,
        position: layout.positions(),
        width: layout.width().max(1) as f64,
    };
    let svg_width = geometry.width * COLUMN + 2.0 * MARGIN;
    let svg_height =
        layout.layers.len().saturating_sub(1) as f64 * ROW + NODE_HEIGHT + 2.0 * MARGIN;
    let mut out = String::with_capacity(256 * drawing.nodes.len() + 1024);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="dag" width="{svg_width}" height="{svg_height}" viewBox="0 0 {svg_width} {svg_height}" data-nodes="{}" data-edges="{}">"#,
        drawing.nodes.len(),
        drawing.edges.len()
    );
    out.push_str(
        r#"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" class="arrowhead"/></marker></defs>"#,
    );
    let ends = |from: usize, to: usize| match (&drawing.nodes[from], &drawing.nodes[to]) {
        (Node::Step { name: a, .. }, Node::Step { name: b, .. }) => {
            format!(r#" data-from="{}" data-to="{}""#, Escaped(a), Escaped(b))
        }
        _ => String::new(),
    };
    for &(from, to) in &drawing.edges {
        let _ = write!(
            out,
            r#"<path class="edge"{} marker-end="url(#arrow)" d="{}"/>"#,
            ends(from, to),
            geometry.edge_path(from, to)
        );
    }
    for &(from, to) in &drawing.after_all {
        let _ = write!(
            out,
            r#"<path class="edge after-all"{} stroke-dasharray="{DASHES}" marker-end="url(#arrow)" d="{}"/>"#,
            ends(from, to),
            geometry.edge_path(from, to)
        );
    }
    let exit_from = drawing.exit_from.unwrap_or(drawing.nodes.len());
    for i in 0..exit_from {
        node(&mut out, &drawing.nodes[i], geometry.centre(i));
    }
    if exit_from < drawing.nodes.len() {
        exit_group(&mut out, &geometry, exit_from);
    }
    out.push_str("</svg>");
    out
}

/// The exit steps (`nodes[first..]`) inside a dashed box labelled `onExit`.
fn exit_group(out: &mut String, geometry: &Geometry, first: usize) {
    let count = geometry.drawing.nodes.len() - first;
    let centres: Vec<(f64, f64)> = (first..geometry.drawing.nodes.len())
        .map(|i| geometry.centre(i))
        .collect();
    let extreme = |pick: fn(&(f64, f64)) -> f64, max: bool| {
        let values = centres.iter().map(pick);
        if max {
            values.fold(f64::MIN, f64::max)
        } else {
            values.fold(f64::MAX, f64::min)
        }
    };
    let left = extreme(|c| c.0, false) - NODE_WIDTH / 2.0 - GROUP_PAD.0;
    let right = extreme(|c| c.0, true) + NODE_WIDTH / 2.0 + GROUP_PAD.0;
    let top = extreme(|c| c.1, false) - NODE_HEIGHT / 2.0 - GROUP_PAD.1;
    let bottom = extreme(|c| c.1, true) + NODE_HEIGHT / 2.0 + GROUP_PAD.0;
    let _ = write!(
        out,
        r#"<g class="exit-group" data-steps="{count}"><title>onExit: runs after every other step</title><rect class="group" x="{left}" y="{top}" width="{}" height="{}" rx="8" stroke-dasharray="{DASHES}"/><text class="group-label" x="{}" y="{}">onExit</text>"#,
        right - left,
        bottom - top,
        left + 6.0,
        top + 12.0,
    );
    for (i, &centre) in (first..).zip(&centres) {
        node(out, &geometry.drawing.nodes[i], centre);
    }
    out.push_str("</g>");
}

/// One box, its centre at `(x, y)`.
fn node(out: &mut String, node: &Node, (x, y): (f64, f64)) {
    let (left, top) = (x - NODE_WIDTH / 2.0, y - NODE_HEIGHT / 2.0);
    let phase = node.phase().as_str();
    match node {
        Node::Step {
            name,
            label,
            items,
            tolerated,
            ..
        } => {
            let mut detail = match items {
                Some(items) => format!("{}/{} items · {phase}", items.succeeded, items.total),
                None => phase.to_string(),
            };
            let mut class = format!("node phase-{phase}");
            if *tolerated {
                detail.push_str(" · tolerated");
                class.push_str(" tolerated");
            }
            let _ = write!(
                out,
                r#"<a href="?step={}"><g class="{class}" data-step="{}" data-phase="{phase}"><title>{}</title><rect x="{left}" y="{top}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="6"/><text x="{x}" y="{}" class="name">{}</text><text x="{x}" y="{}" class="detail">{}</text></g></a>"#,
                query_value(name),
                Escaped(name),
                Escaped(&title(label, *tolerated)),
                y - 4.0,
                Escaped(&shorten(label)),
                y + 13.0,
                Escaped(&detail),
            );
        }
        Node::Band {
            first_layer,
            last_layer,
            counts,
        } => band(out, (*first_layer, *last_layer), counts, phase, (x, y)),
    }
}

/// A box's tooltip: its label, and for a tolerated failure why the workflow went on.
fn title(label: &str, tolerated: bool) -> String {
    if tolerated {
        format!("{label}\nfailed, tolerated: continueOn.failed lets the workflow go on")
    } else {
        label.to_string()
    }
}

/// A band of a collapsed drawing: its layers, its steps, and a bar of their phases.
fn band(
    out: &mut String,
    (first_layer, last_layer): (usize, usize),
    counts: &[(workflow_operator_core::crd::StepPhase, usize)],
    phase: &str,
    (x, y): (f64, f64),
) {
    let (left, top) = (x - NODE_WIDTH / 2.0, y - NODE_HEIGHT / 2.0);
    let steps: usize = counts.iter().map(|c| c.1).sum();
    let layers = if first_layer == last_layer {
        format!("layer {first_layer}")
    } else {
        format!("layers {first_layer}–{last_layer}")
    };
    let shown: Vec<String> = counts
        .iter()
        .filter(|c| c.1 > 0)
        .map(|(p, n)| format!("{n} {}", p.as_str()))
        .collect();
    let _ = write!(
        out,
        r#"<g class="node band phase-{phase}" data-layers="{first_layer}-{last_layer}" data-steps="{steps}" data-phase="{phase}"><title>{layers}: {steps} steps: {}</title><rect x="{left}" y="{top}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="6"/>"#,
        shown.join(", ")
    );
    // A bar of the phases, each segment as wide as its share.
    let mut bar_x = left + 6.0;
    for (phase, n) in counts.iter().filter(|c| c.1 > 0) {
        let w = (NODE_WIDTH - 12.0) * *n as f64 / steps as f64;
        let _ = write!(
            out,
            r#"<rect class="share phase-{}" x="{bar_x}" y="{}" width="{w}" height="6"/>"#,
            phase.as_str(),
            top + NODE_HEIGHT - 10.0
        );
        bar_x += w;
    }
    let _ = write!(
        out,
        r#"<text x="{x}" y="{}" class="name">{layers}: {steps} steps</text><text x="{x}" y="{}" class="detail">{}</text></g>"#,
        y - 8.0,
        y + 7.0,
        Escaped(&shorten_to(&shown.join(" · "), 34))
    );
}

/// The label cut to [`LABEL_CHARS`] characters, with an ellipsis when cut.
fn shorten(label: &str) -> String {
    shorten_to(label, LABEL_CHARS)
}

/// `text` cut to `chars` characters, with an ellipsis when cut.
fn shorten_to(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    let mut short: String = text.chars().take(chars - 1).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::graph::drawing;
    use workflow_operator_core::WorkFlow;

    #[test]
    fn every_step_is_a_node_with_its_name_and_phase_and_every_dependency_an_edge() {
        let wf = WorkFlow::test("d")
            .step("a", &[])
            .step("b", &["a"])
            .step("c", &["a"])
            .step("d", &["b", "c"])
            .build();
        let svg = render(&drawing(&wf).unwrap());
        assert_eq!(svg.matches(r#"data-phase="Waiting""#).count(), 4, "{svg}");
        for step in ["a", "b", "c", "d"] {
            assert!(svg.contains(&format!(r#"data-step="{step}""#)), "{svg}");
        }
        assert_eq!(svg.matches(r#"class="edge""#).count(), 4, "{svg}");
    }

    #[test]
    fn a_name_with_markup_is_text() {
        let wf = WorkFlow::test("x")
            .step("<img src=x onerror=alert(1)>", &[])
            .build();
        let svg = render(&drawing(&wf).unwrap());
        assert!(!svg.contains("<img"), "{svg}");
        assert!(
            svg.contains(r#"data-step="&lt;img src=x onerror=alert(1)&gt;""#),
            "{svg}"
        );
        assert!(
            svg.contains("?step=%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"),
            "{svg}"
        );
    }
}
