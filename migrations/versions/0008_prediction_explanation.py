"""add why-this-label to predictions: the model's own scores, the confirmed issues that voted, the threshold

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 15:45:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('predictions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('model_scores', sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column('neighbours', sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column('threshold', sa.Float(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('predictions', schema=None) as batch_op:
        batch_op.drop_column('threshold')
        batch_op.drop_column('neighbours')
        batch_op.drop_column('model_scores')
