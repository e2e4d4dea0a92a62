"""The ``kbf`` command line: the host's commands (``commands``) plus every plugin's
(``kb_register_commands``, loaded only when the command table is listed or a name is not the
host's). ``main`` is the console-script entry point."""


def main(args=None):
    """Run one command; the process ends with it. Before Python's own shutdown, every object is
    moved out of the collector's reach (``gc.freeze``): the shutdown would otherwise walk all the
    objects of the libraries a command imported, several times, to free memory the operating
    system takes back anyway (about a twentieth of a ``kbf ask``)."""
    from kbframework.cli.commands import cli

    try:
        return cli(args)
    finally:
        import gc

        gc.freeze()
