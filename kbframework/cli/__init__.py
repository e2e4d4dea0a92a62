"""The ``kbf`` command line: the host's commands (``commands``) plus every plugin's
(``kb_register_commands``, loaded only when the command table is listed or a name is not the
host's). ``main`` is the console-script entry point."""


def main(args=None):
    from kbframework.cli.commands import cli

    return cli(args)
