print("volley: not built yet")
