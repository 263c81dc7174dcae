"""Vehicle dynamics below the engines: the kinematic bicycle, learned dynamics models, and the
corrections of a coarse simulator fitted by ``grounding`` (with their saved artifacts)."""
