/* raybox_cli.h - the batch CLI's subcommands that live in files of their
 * own (raybox.c has the dispatch, JSON intersect, render and devices;
 * raybox_batch.c the batch commands). Each takes the
 * arguments after its name and returns the exit status. */
#ifndef RB_RAYBOX_CLI_H
#define RB_RAYBOX_CLI_H

int cmd_visibility(int argc, char **argv);
/* `raybox intersect --rays ...`: the batch form (raybox.c sends it here
 * when --rays or --scene is among the arguments). */
int cmd_intersect_files(int argc, char **argv);

#endif
