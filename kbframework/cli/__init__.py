"""The ``kbf`` command line: the host's commands (``commands``) plus every plugin's
(``kb_register_commands``). ``main`` is the console-script entry point."""


def main(args=None):
    import sys

    import click

    from kbframework.cli.commands import add_plugin_commands, cli
    from kbframework.errors import KBError

    try:
        add_plugin_commands(cli)
    except KBError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(3)
    return cli(args)
