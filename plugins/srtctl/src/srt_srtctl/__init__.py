"""srtctl 0.3.0 recipes as data: what srtctl would launch, computed without launching it."""
