/* raybox_cli.h - the batch CLI's subcommands that live in files of their
 * own (raybox.c has the dispatch, intersect and devices). Each takes the
 * arguments after its name and returns the exit status. */
#ifndef RB_RAYBOX_CLI_H
#define RB_RAYBOX_CLI_H

int cmd_visibility(int argc, char **argv);

#endif
