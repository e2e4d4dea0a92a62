"""The two pluggy markers, in their own module so plugins import them without side effects."""
import pluggy

PROJECT = "kbframework"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
