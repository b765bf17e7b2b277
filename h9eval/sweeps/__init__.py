"""Grids of cells (tasks x policies x parameters x modes x summarizers x repeats), run in
parallel and resumably into one versioned results folder."""
