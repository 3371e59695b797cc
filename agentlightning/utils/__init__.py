"""Small helpers shared by several Agent Lightning modules."""
