#pragma once

#include <string>
#include <string_view>

// Who speaks on air-run's console. In a job of several nodes every agent
// prints its own lines, and a job's consoles often end up in one file (srun
// gathers them): each line air-run itself writes there names its node,
// "air-run (node 1): ...", as the rank lines name their rank. On one node
// the lines stay "air-run: ...", byte for byte.

namespace air {

/// "air-run", or "air-run (node N)" in a job of more than one node. Pure.
std::string air_run_name(int node_rank, int num_nodes);

/// `text` (whole lines) with air-run's name on each line of its own (one
/// that begins "air-run:" or "air-run ") replaced by air_run_name(). Lines
/// that name a node already, and every other line (a rank's, an indented
/// detail), stay as they are. Pure; `text` itself on one node.
std::string name_node(std::string_view text, int node_rank, int num_nodes);

/// The node this process speaks for, from the moment the launch knows it
/// (the spec's --node-rank, Slurm's variables, the join under c10d, a
/// regroup); one node until then.
void set_console_node(int node_rank, int num_nodes);

/// name_node() for the node set by set_console_node(): every line air-run
/// writes on its console that does not come with a plan at hand goes
/// through it on its way out.
std::string said(std::string_view text);

/// "air-run: ", or "air-run (node N): " for the node set by set_console_node().
std::string air_run_says();

/// Writes `text` (air-run's own whole lines) to stderr through said(): the
/// one way the launch's lines that do not go through the run's console
/// (core/run/console.hpp) reach the terminal.
void say_on_stderr(std::string_view text);

} // namespace air
