// Entry point of the shardcheck command line.
#include "harness/cli/cli.h"

int main(int argc, char** argv) { return shardcheck::RunCli(argc, argv); }
