//! A [`Drawing`] as inline SVG: each step a `<g class="node" data-step=".." data-phase="..">`
//! coloured by phase (the classes are styled by the embedded stylesheet), linking to its step
//! panel; each dependency an `<path class="edge">` from the bottom of one box to the top of the
//! next. Every user string goes through [`escape`](super::escape).

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

/// The drawing as an `<svg>` element (with its namespace, so it also stands alone).
pub fn render(drawing: &Drawing) -> String {
    let layout = &drawing.layout;
    let position = layout.positions();
    let width = layout.width().max(1) as f64;
    let svg_width = width * COLUMN + 2.0 * MARGIN;
    let svg_height =
        layout.layers.len().saturating_sub(1) as f64 * ROW + NODE_HEIGHT + 2.0 * MARGIN;
    // Centre of each node's box.
    let centre = |node: usize| -> (f64, f64) {
        let x = MARGIN + (width * COLUMN) / 2.0 + layout.centred(node, &position) * COLUMN;
        let y = MARGIN + layout.layer[node] as f64 * ROW + NODE_HEIGHT / 2.0;
        (x, y)
    };
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
    for &(from, to) in &drawing.edges {
        let ((x1, y1), (x2, y2)) = (centre(from), centre(to));
        let (y1, y2) = (y1 + NODE_HEIGHT / 2.0, y2 - NODE_HEIGHT / 2.0);
        let bend = (y2 - y1) / 2.0;
        let _ = write!(
            out,
            r#"<path class="edge" marker-end="url(#arrow)" d="M {x1} {y1} C {x1} {} {x2} {} {x2} {y2}"/>"#,
            y1 + bend,
            y2 - bend
        );
    }
    for (i, node) in drawing.nodes.iter().enumerate() {
        let (x, y) = centre(i);
        let (left, top) = (x - NODE_WIDTH / 2.0, y - NODE_HEIGHT / 2.0);
        let phase = node.phase().as_str();
        match node {
            Node::Step {
                name, label, items, ..
            } => {
                let detail = match items {
                    Some(items) => format!("{}/{} items · {phase}", items.succeeded, items.total),
                    None => phase.to_string(),
                };
                let _ = write!(
                    out,
                    r#"<a href="?step={}"><g class="node phase-{phase}" data-step="{}" data-phase="{phase}"><title>{}</title><rect x="{left}" y="{top}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="6"/><text x="{x}" y="{}" class="name">{}</text><text x="{x}" y="{}" class="detail">{}</text></g></a>"#,
                    query_value(name),
                    Escaped(name),
                    Escaped(label),
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
            } => {
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
        }
    }
    out.push_str("</svg>");
    out
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
