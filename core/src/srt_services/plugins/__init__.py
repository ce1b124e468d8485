"""Plugin machinery: discovery and controls, the typed facade, the built-in plugin."""
