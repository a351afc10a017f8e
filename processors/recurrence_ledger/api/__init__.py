"""The HTTP API and dashboard over the read side's Redis (contract §8, §14):
``app.py`` builds the FastAPI app, ``routes/`` holds one module per
resource, ``settings.py`` and ``auth.py`` say who may read."""
