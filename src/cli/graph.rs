//! `workflow-operator graph`: a workflow's DAG as Graphviz DOT or Mermaid, from a manifest or,
//! by its name, from the cluster. Each step is a node (a step that fans out is one node with
//! its count), labelled with its `when`; the exit steps (`onExit`) are a group of their own that
//! runs after every other step. A workflow read from the cluster has each node coloured and
//! labelled with its step's phase, as `get` shows it.
//!
//! Drawing is pure ([`render`]): the workflow's spec and, for a live one, its steps' views
//! ([`step_views`](workflow_operator_core::step_view::step_views)) in; the text out.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use clap::Args;

use workflow_operator_core::crd::{Step, WorkFlowSpec};
use workflow_operator_core::dag::Dag;
use workflow_operator_core::fan_out::{display_name, node_label};
use workflow_operator_core::plan::Compiled;
use workflow_operator_core::step_view::{StepPhase, StepView};

use super::inspect::{self, Format};

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// A WorkFlow manifest (its first WorkFlow is drawn) or the name of a workflow in the
    /// cluster. Read as a file when it is `-` (standard input), an existing path, holds a `/`
    /// or ends in `.yaml`, `.yml` or `.json`; as a name otherwise.
    #[arg(
        value_name = "FILE|NAME",
        required_unless_present = "filename",
        conflicts_with = "filename"
    )]
    target: Option<PathBuf>,
    /// Draw the first WorkFlow of this manifest, as `kubectl -f` reads one (`-` for standard
    /// input), whatever its name looks like.
    #[arg(short = 'f', long, value_name = "FILE")]
    filename: Option<PathBuf>,
    /// `dot` (Graphviz) or `mermaid`.
    #[arg(long, value_enum, default_value = "dot")]
    format: Format,
    #[command(flatten)]
    cluster: super::client::ClusterArgs,
}

/// Where the workflow to draw is.
#[derive(Debug)]
enum Source<'a> {
    File(&'a Path),
    Name(&'a str),
}

impl GraphArgs {
    fn source(&self) -> Source<'_> {
        match (&self.filename, &self.target) {
            (Some(file), _) => Source::File(file),
            (None, Some(target)) => match target.to_str() {
                Some(name) if !looks_like_a_file(target) => Source::Name(name),
                _ => Source::File(target),
            },
            (None, None) => unreachable!("clap requires FILE|NAME or -f"),
        }
    }
}

/// Whether `target` names a manifest rather than a workflow (whose name has no `/`).
fn looks_like_a_file(target: &Path) -> bool {
    let by_extension = target
        .extension()
        .is_some_and(|e| ["yaml", "yml", "json"].iter().any(|x| e == *x));
    target == Path::new("-")
        || target.to_str().is_none_or(|t| t.contains('/'))
        || by_extension
        || target.exists()
}

pub fn graph(args: GraphArgs) -> ExitCode {
    match args.source() {
        Source::File(file) => {
            let drawn =
                inspect::expanded_workflow(file).and_then(|spec| render(&spec, None, args.format));
            match drawn {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(problem) => {
                    eprintln!("error: {problem}");
                    ExitCode::FAILURE
                }
            }
        }
        Source::Name(name) => super::block_on(super::report(live(name, &args))),
    }
}

/// Draws the workflow `name` as it runs, its steps' phases read as `get` reads them.
async fn live(name: &str, args: &GraphArgs) -> anyhow::Result<()> {
    let (client, namespace) = args.cluster.connect().await?;
    let shown = super::get::Shown::read(&client, &namespace, name).await?;
    let text = render(&shown.workflow.spec, Some(&shown.steps), args.format)
        .map_err(|problem| anyhow!("workflow {namespace}/{name}: {problem}"))?;
    print!("{text}");
    Ok(())
}

/// The drawing of `spec` in `format`; with `views` (a live workflow's), each node coloured and
/// labelled with its step's phase. Fails when the DAG is invalid.
fn render(
    spec: &WorkFlowSpec,
    views: Option<&[StepView]>,
    format: Format,
) -> Result<String, String> {
    let drawing = Drawing::of(spec, views)?;
    Ok(match format {
        Format::Dot => drawing.to_dot(),
        Format::Mermaid => drawing.to_mermaid(),
    })
}

/// What is drawn, before it is written in a format.
#[derive(Debug, Default)]
struct Drawing {
    title: Option<String>,
    /// The steps of `spec.containers`, `s0`, `s1`, ...
    steps: Vec<Node>,
    /// The exit steps, `e0`, `e1`, ..., drawn as a group.
    exit: Vec<Node>,
    /// From a dependency to its dependent.
    edges: Vec<(String, String)>,
    /// From each last step to each exit step that depends on no other: it runs after them all.
    after_all: Vec<(String, String)>,
}

/// A step as drawn.
#[derive(Debug)]
struct Node {
    id: String,
    /// Its name (with its fan-out), its `when`, its phase: a line each.
    lines: Vec<String>,
    phase: Option<StepPhase>,
}

impl Drawing {
    fn of(spec: &WorkFlowSpec, views: Option<&[StepView]>) -> Result<Drawing, String> {
        let compiled = Compiled::new(spec);
        let dag = compiled.dag.as_ref().map_err(ToString::to_string)?;
        let runs = spec.run_count();
        let live = views.map(Live::of);
        let mut drawing = Drawing {
            title: (runs > 1).then(|| format!("runs: {runs}")),
            ..Drawing::default()
        };
        for (i, step) in spec.containers.iter().enumerate() {
            let label = node_label(step, compiled.flow.fan_out.get(&i));
            let node = Node::of(format!("s{i}"), label, step, live.as_ref(), runs);
            drawing.steps.push(node);
            drawing.edges.extend(edges(dag, i, "s"));
        }
        let Some(exit) = &compiled.exit else {
            return Ok(drawing);
        };
        let last: Vec<usize> = (0..dag.len())
            .filter(|&i| dag.dependents(i).next().is_none())
            .collect();
        for (i, step) in spec.on_exit.iter().enumerate() {
            let node = Node::of(
                format!("e{i}"),
                step.step_name.clone(),
                step,
                live.as_ref(),
                1,
            );
            drawing.exit.push(node);
            drawing.edges.extend(edges(exit, i, "e"));
            if exit.dependencies(i).next().is_none() {
                drawing
                    .after_all
                    .extend(last.iter().map(|s| (format!("s{s}"), format!("e{i}"))));
            }
        }
        Ok(drawing)
    }

    fn to_dot(&self) -> String {
        let mut out = String::from("digraph workflow {\n    rankdir=LR;\n");
        if let Some(title) = &self.title {
            let _ = writeln!(out, "    label=\"{}\";\n    labelloc=t;", dot_escape(title));
        }
        for node in &self.steps {
            let _ = writeln!(out, "    {}", node.to_dot());
        }
        if !self.exit.is_empty() {
            out.push_str(
                "    subgraph cluster_exit {\n        label=\"onExit\";\n        style=dashed;\n",
            );
            for node in &self.exit {
                let _ = writeln!(out, "        {}", node.to_dot());
            }
            out.push_str("    }\n");
        }
        for (from, to) in &self.edges {
            let _ = writeln!(out, "    {from} -> {to};");
        }
        for (from, to) in &self.after_all {
            let _ = writeln!(out, "    {from} -> {to} [style=dashed];");
        }
        out.push_str("}\n");
        out
    }

    fn to_mermaid(&self) -> String {
        let mut out = String::new();
        if let Some(title) = &self.title {
            let _ = writeln!(out, "---\ntitle: \"{}\"\n---", title.replace('"', "'"));
        }
        out.push_str("flowchart LR\n");
        for node in &self.steps {
            let _ = writeln!(out, "    {}", node.to_mermaid());
        }
        if !self.exit.is_empty() {
            out.push_str("    subgraph onExit [\"onExit\"]\n");
            for node in &self.exit {
                let _ = writeln!(out, "        {}", node.to_mermaid());
            }
            out.push_str("    end\n");
        }
        for (from, to) in &self.edges {
            let _ = writeln!(out, "    {from} --> {to}");
        }
        for (from, to) in &self.after_all {
            let _ = writeln!(out, "    {from} -.-> {to}");
        }
        out.push_str(&self.mermaid_classes());
        out
    }

    /// A class per phase drawn, and the nodes in each.
    fn mermaid_classes(&self) -> String {
        let mut out = String::new();
        for phase in PHASES {
            let ids: Vec<&str> = (self.steps.iter().chain(&self.exit))
                .filter(|n| n.phase == Some(phase))
                .map(|n| n.id.as_str())
                .collect();
            if ids.is_empty() {
                continue;
            }
            let (fill, stroke) = colours(phase);
            let name = phase.as_str();
            let _ = writeln!(out, "    classDef {name} fill:{fill},stroke:{stroke}");
            let _ = writeln!(out, "    class {} {name}", ids.join(","));
        }
        out
    }
}

/// The edges from the dependencies of step `i` of `dag`, its nodes named `{prefix}{index}`.
fn edges<'a>(
    dag: &'a Dag,
    i: usize,
    prefix: &'a str,
) -> impl Iterator<Item = (String, String)> + 'a {
    dag.dependencies(i)
        .map(move |d| (format!("{prefix}{d}"), format!("{prefix}{i}")))
}

impl Node {
    fn of(id: String, label: String, step: &Step, live: Option<&Live>, runs: u32) -> Node {
        let mut lines = vec![label];
        lines.extend(step.when.as_deref().map(|w| format!("when: {w}")));
        let mut phase = None;
        if let Some(live) = live {
            let (shown, drawn) = live.of_step(&step.step_name, runs);
            lines.extend(shown);
            phase = Some(drawn);
        }
        Node { id, lines, phase }
    }

    fn to_dot(&self) -> String {
        let label = dot_escape(&self.lines.join("\n"));
        match self.phase {
            None => format!("{} [label=\"{label}\"];", self.id),
            Some(phase) => {
                let (fill, stroke) = colours(phase);
                let dashed = if phase == StepPhase::Skipped {
                    ",dashed"
                } else {
                    ""
                };
                format!(
                    "{} [label=\"{label}\", style=\"filled{dashed}\", fillcolor=\"{fill}\", color=\"{stroke}\"];",
                    self.id
                )
            }
        }
    }

    fn to_mermaid(&self) -> String {
        let lines: Vec<String> = self.lines.iter().map(|l| mermaid_escape(l)).collect();
        format!("{}[\"{}\"]", self.id, lines.join("<br>"))
    }
}

/// A live workflow's step views by name.
struct Live<'a>(HashMap<&'a str, &'a StepView>);

impl<'a> Live<'a> {
    fn of(views: &'a [StepView]) -> Live<'a> {
        Live(views.iter().map(|v| (v.name.as_str(), v)).collect())
    }

    /// The lines that say where `step` stands (one per run when there are several), and the
    /// phase it is coloured with: that of its latest run that has left `Waiting`.
    fn of_step(&self, step: &str, runs: u32) -> (Vec<String>, StepPhase) {
        let mut lines = Vec::new();
        let mut drawn = StepPhase::Waiting;
        for run in 0..runs {
            let Some(view) = self.0.get(display_name(step, run, runs, None).as_str()) else {
                continue;
            };
            let mut line = view.phase.as_str().to_string();
            if let Some(items) = view.items {
                line = format!("{line} · {}", super::get::items(items));
            }
            if runs > 1 {
                line = format!("run{run} {line}");
            }
            lines.push(line);
            if view.phase != StepPhase::Waiting {
                drawn = view.phase;
            }
        }
        (lines, drawn)
    }
}

/// Every phase, in the order classes are written.
const PHASES: [StepPhase; 8] = [
    StepPhase::Waiting,
    StepPhase::Queued,
    StepPhase::Running,
    StepPhase::Interactive,
    StepPhase::Succeeded,
    StepPhase::Failed,
    StepPhase::TimedOut,
    StepPhase::Skipped,
];

/// A phase's fill and stroke, as the web view colours it.
fn colours(phase: StepPhase) -> (&'static str, &'static str) {
    match phase {
        StepPhase::Succeeded => ("#c8e6c9", "#2e7d32"),
        StepPhase::Running => ("#bbdefb", "#1565c0"),
        StepPhase::Interactive => ("#fff9c4", "#f57f17"),
        StepPhase::Failed => ("#ffcdd2", "#c62828"),
        StepPhase::TimedOut => ("#ffe0b2", "#e65100"),
        StepPhase::Queued => ("#e1bee7", "#6a1b9a"),
        StepPhase::Waiting => ("#f5f5f5", "#616161"),
        StepPhase::Skipped => ("#fafafa", "#9e9e9e"),
    }
}

/// Text inside a DOT double-quoted string: a line break is `\n`.
fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Text inside a Mermaid double-quoted label: `#`, `"`, `<`, `>` and `&` as its entity codes,
/// so neither the quotes nor HTML end the label.
fn mermaid_escape(s: &str) -> String {
    s.replace('#', "#35;")
        .replace('&', "#amp;")
        .replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_operator_core::WorkFlow;
    use workflow_operator_core::crd::ItemCounts;

    /// `a -> b (when) -> c`, `a -> d`; exit steps `report`, then `notify` after it.
    fn spec() -> WorkFlowSpec {
        WorkFlow::test("w")
            .step("a", &[])
            .step("b", &["a"])
            .when(r#"steps.a.outputs.ok == "yes" && 1 < 2"#)
            .step("c", &["b"])
            .step("d", &["a"])
            .exit_step("report", &[])
            .exit_step("notify", &["report"])
            .when(r#"workflow.status == "Failed""#)
            .build()
            .spec
    }

    fn view(name: &str, phase: StepPhase) -> StepView {
        StepView::empty(name, phase)
    }

    #[test]
    fn exit_steps_are_a_group_after_the_last_steps_with_their_own_edges() {
        let dot = render(&spec(), None, Format::Dot).unwrap();
        let group = dot.split("subgraph cluster_exit {").nth(1).expect(&dot);
        let group = group.split("    }\n").next().unwrap();
        assert!(group.contains("label=\"onExit\";"), "{dot}");
        assert!(group.contains("e0 [label=\"report\"];"), "{dot}");
        assert!(group.contains("e1 [label=\"notify"), "{dot}");
        for edge in [
            "s0 -> s1;",
            "s1 -> s2;",
            "s0 -> s3;",
            "e0 -> e1;",
            "s2 -> e0 [style=dashed];",
            "s3 -> e0 [style=dashed];",
        ] {
            assert!(dot.contains(edge), "{edge} not in {dot}");
        }
        assert_eq!(dot.matches("->").count(), 6, "{dot}");

        let mermaid = render(&spec(), None, Format::Mermaid).unwrap();
        let group = mermaid.split("subgraph onExit [\"onExit\"]\n").nth(1);
        let group = group.expect(&mermaid).split("    end\n").next().unwrap();
        assert!(group.contains("e0[\"report\"]"), "{mermaid}");
        for edge in ["s0 --> s1", "e0 --> e1", "s2 -.-> e0", "s3 -.-> e0"] {
            assert!(mermaid.contains(edge), "{edge} not in {mermaid}");
        }
        assert_eq!(mermaid.matches("->").count(), 6, "{mermaid}");
        assert!(!mermaid.contains("classDef"), "no phases: {mermaid}");
    }

    #[test]
    fn a_when_is_a_line_of_its_steps_label_escaped_for_each_format() {
        let dot = render(&spec(), None, Format::Dot).unwrap();
        assert!(
            dot.contains(r#"s1 [label="b\nwhen: steps.a.outputs.ok == \"yes\" && 1 < 2"];"#),
            "{dot}"
        );
        assert!(
            dot.contains(r#"e1 [label="notify\nwhen: workflow.status == \"Failed\""];"#),
            "{dot}"
        );
        let mermaid = render(&spec(), None, Format::Mermaid).unwrap();
        assert!(
            mermaid.contains(
                r#"s1["b<br>when: steps.a.outputs.ok == #quot;yes#quot; #amp;#amp; 1 #lt; 2"]"#
            ),
            "{mermaid}"
        );
        assert_eq!(mermaid_escape("#1 <b>"), "#35;1 #lt;b#gt;");
        assert_eq!(dot_escape("a\\b\"c\nd"), r#"a\\b\"c\nd"#);
    }

    #[test]
    fn a_live_workflow_colours_and_labels_each_node_with_its_phase() {
        let mut views = vec![
            view("a", StepPhase::Succeeded),
            view("b", StepPhase::Skipped),
            view("c", StepPhase::Waiting),
            view("d", StepPhase::Running),
            view("report", StepPhase::Failed),
            view("notify", StepPhase::Waiting),
        ];
        views[3].items = Some(ItemCounts {
            total: 3,
            succeeded: 1,
            running: 2,
            ..ItemCounts::default()
        });
        let dot = render(&spec(), Some(&views), Format::Dot).unwrap();
        for node in [
            r##"s0 [label="a\nSucceeded", style="filled", fillcolor="#c8e6c9", color="#2e7d32"];"##,
            r##"s1 [label="b\nwhen: steps.a.outputs.ok == \"yes\" && 1 < 2\nSkipped", style="filled,dashed""##,
            r##"s3 [label="d\nRunning · 1/3 items, 2 running", style="filled", fillcolor="#bbdefb""##,
            r##"e0 [label="report\nFailed", style="filled", fillcolor="#ffcdd2""##,
        ] {
            assert!(dot.contains(node), "{node} not in {dot}");
        }
        let mermaid = render(&spec(), Some(&views), Format::Mermaid).unwrap();
        for line in [
            "s0[\"a<br>Succeeded\"]",
            "e1[\"notify<br>when: workflow.status == #quot;Failed#quot;<br>Waiting\"]",
            "classDef Succeeded fill:#c8e6c9,stroke:#2e7d32",
            "class s0 Succeeded",
            "class s2,e1 Waiting",
            "class e0 Failed",
        ] {
            assert!(mermaid.contains(line), "{line} not in {mermaid}");
        }
    }

    #[test]
    fn each_run_of_a_live_workflow_is_a_line_coloured_by_the_latest_that_started() {
        let spec = WorkFlow::test("w").step("a", &[]).runs(2).build().spec;
        let views = [
            view("run0/a", StepPhase::Succeeded),
            view("run1/a", StepPhase::Running),
        ];
        let dot = render(&spec, Some(&views), Format::Dot).unwrap();
        assert!(dot.contains("label=\"runs: 2\";"), "{dot}");
        assert!(
            dot.contains(r##"s0 [label="a\nrun0 Succeeded\nrun1 Running", style="filled", fillcolor="#bbdefb""##),
            "{dot}"
        );
    }

    #[test]
    fn an_invalid_dag_is_refused() {
        let spec = WorkFlow::test("w")
            .step("a", &["b"])
            .step("b", &["a"])
            .build()
            .spec;
        let problem = render(&spec, None, Format::Dot).unwrap_err();
        assert!(problem.contains("cycle"), "{problem}");
    }

    #[test]
    fn a_path_or_manifest_is_a_file_and_anything_else_a_workflow_name() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            graph: GraphArgs,
        }
        let source = |args: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("graph").chain(args.iter().copied()));
            let graph = cli.unwrap().graph;
            match graph.source() {
                Source::File(file) => format!("file {}", file.display()),
                Source::Name(name) => format!("name {name}"),
            }
        };
        assert_eq!(source(&["release"]), "name release");
        assert_eq!(source(&["release", "-n", "ci"]), "name release");
        assert_eq!(source(&["release.yaml"]), "file release.yaml");
        assert_eq!(source(&["wf.json"]), "file wf.json");
        assert_eq!(source(&["examples/diamond"]), "file examples/diamond");
        assert_eq!(source(&["-"]), "file -");
        // Tests run in the package's directory, which holds a `Makefile`.
        assert_eq!(source(&["Makefile"]), "file Makefile");
        assert_eq!(source(&["-f", "release"]), "file release");
        assert!(Cli::try_parse_from(["graph"]).is_err());
        assert!(Cli::try_parse_from(["graph", "a", "-f", "b"]).is_err());
    }
}
